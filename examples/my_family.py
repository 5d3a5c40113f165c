"""A model family of your own, trained and exported like the built-in ones.

    keras-attn train --model-file examples/my_family.py --help        (its options are flags)
    keras-attn train --model-file examples/my_family.py --units 64 --distribution sparsemax \
        --corpus synthetic --steps 500 --out runs/mine
    keras-attn export runs/mine --model_base_path models/mine

`keras-attn train --model-file` imports this file by path; the file registers its families with
`keras_attn.models.register_family`. This one is a Bahdanau-style translator (Bahdanau et al.,
2015, arXiv:1409.0473) whose attention distribution is a choice: softmax, sparsemax (Martins &
Astudillo, 2016, arXiv:1602.02068) or 1.5-entmax (Peters et al., 2019, arXiv:1905.05702).

The file is copied into the run directory (`model_file.py`), so it must be self-contained: it
may import installed packages, not modules lying beside it. Run directly
(`python examples/my_family.py --out DIR`), it trains a small run with itself and exports it.
"""

from __future__ import annotations

import dataclasses

import keras

from keras_attn.layers import BahdanauDecoder, BidirectionalEncoder
from keras_attn.models import Family, RNNTranslatorSteps, register_family


@dataclasses.dataclass(frozen=True)
class AttentionTranslatorOptions:
    """The family's hyperparameters: each field is a `keras-attn train` flag."""

    embedding_dim: int = dataclasses.field(
        default=64, metadata={"help": "token embedding width", "min": 1}
    )
    units: int = dataclasses.field(
        default=128,
        metadata={"help": "decoder state width (the encoder's per direction: half)", "min": 2},
    )
    cell: str = dataclasses.field(
        default="lstm", metadata={"help": "recurrent cell", "choices": ("lstm", "gru")}
    )
    distribution: str = dataclasses.field(
        default="softmax",
        metadata={
            "help": "attention distribution",
            "choices": ("softmax", "sparsemax", "entmax15"),
        },
    )
    dropout: float = dataclasses.field(
        default=0.1, metadata={"help": "dropout on embeddings and decoder outputs", "min": 0.0}
    )


def attention_translator(
    source_vocabulary_size: int,
    target_vocabulary_size: int,
    embedding_dim: int = 64,
    units: int = 128,
    cell: str = "lstm",
    distribution: str = "softmax",
    dropout: float = 0.1,
) -> keras.Model:
    """Source ids `(batch, T_x)` and target ids `(batch, T_y)` -> logits `(batch, T_y, V_y)`.

    The layer names are those `RNNTranslatorSteps` looks up, so it decodes (and exports) the
    trained model step by step: `source_embedding`, `encoder`, `bridge_i`, `target_embedding`,
    `decoder`, `output_projection`.
    """
    source_ids = keras.Input((None,), dtype="int32", name="source_ids")
    target_ids = keras.Input((None,), dtype="int32", name="target_ids")
    source = keras.layers.Embedding(
        source_vocabulary_size, embedding_dim, mask_zero=True, name="source_embedding"
    )(source_ids)
    source = keras.layers.Dropout(dropout)(source)
    # memory (batch, T_x, units); final states (batch, units) each: [h_fwd; h_bwd] (and c)
    memory, *final_states = BidirectionalEncoder(units // 2, cell=cell, name="encoder")(source)
    initial_state = [
        keras.layers.Dense(units, activation="tanh", name=f"bridge_{index}")(state)
        for index, state in enumerate(final_states)
    ]
    target = keras.layers.Embedding(
        target_vocabulary_size, embedding_dim, mask_zero=True, name="target_embedding"
    )(target_ids)
    target = keras.layers.Dropout(dropout)(target)
    decoder = BahdanauDecoder(units, cell=cell, distribution=distribution, name="decoder")
    outputs = decoder(target, memory, initial_state=initial_state)  # (batch, T_y, units)
    outputs = keras.layers.Dropout(dropout)(outputs)
    logits = keras.layers.Dense(target_vocabulary_size, name="output_projection", dtype="float32")(
        outputs
    )
    return keras.Model({"source_ids": source_ids, "target_ids": target_ids}, logits)


FAMILY = Family(
    name="my-translator",
    kind="translator",
    options=AttentionTranslatorOptions,
    build=attention_translator,
    steps=RNNTranslatorSteps,
    # The schedule `keras-attn train` uses for each of --learning-rate, --warmup-steps and
    # --schedule not given.
    learning_rate=5e-3,
    warmup_steps=50,
    schedule="cosine",
)
register_family(FAMILY)

if __name__ == "__main__":
    import argparse
    import subprocess
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for the run and its export")
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    command = [sys.executable, "-m", "keras_attn.cli"]
    subprocess.run(
        [*command, "train", "--model-file", __file__, "--corpus", "synthetic", "--units", "64",
         "--steps", str(args.steps), "--out", f"{args.out}/run"],
        check=True,
    )  # fmt: skip
    subprocess.run(
        [*command, "export", f"{args.out}/run", "--model_base_path", f"{args.out}/models"],
        check=True,
    )
