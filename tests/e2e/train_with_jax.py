"""Train the translator of examples/own_translator.py under JAX, then decode greedily.

    KERAS_BACKEND=jax python tests/e2e/train_with_jax.py OUT

Runs `examples/own_translator.py --train-only --out OUT` (a small setting), which writes
`OUT/translator.keras` and `OUT/vocab.txt`, then loads the model and writes `OUT/greedy.json`:
the held-out sources and the model's greedy translations, tokens and scores from
`keras_attn.decoding.greedy_search`, under JAX. The test beside it exports the model under
TensorFlow and compares what the SavedModel serves with these translations.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import keras
from keras import ops

from keras_attn.decoding import greedy_search

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_translator.py"
TRAIN_FLAGS = ["--pairs", "600", "--epochs", "3", "--units", "16", "--train-only"]
HELD_OUT = 16


def load_example():
    spec = importlib.util.spec_from_file_location("own_translator", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prefix_step(model: keras.Model, source_ids, width: int):
    """A step rerunning `model` on the target prefix, held in a `(batch, width)` buffer."""

    def step(tokens, state):
        t = state["t"]
        column = ops.one_hot(t, width, dtype="int32")  # (width,)
        prefix = state["prefix"] * (1 - column) + ops.expand_dims(tokens, 1) * column
        logits = model({"source_ids": source_ids, "target_ids": prefix})  # (batch, width, V)
        read = ops.cast(column, logits.dtype)[None, :, None]
        return ops.sum(logits * read, axis=1), {"t": t + 1, "prefix": prefix}

    return step


def main(out: Path) -> None:
    assert keras.backend.backend() == "jax", keras.backend.backend()
    example = load_example()
    assert example.main(["--out", str(out), *TRAIN_FLAGS]) == 0
    model = keras.saving.load_model(out / "translator.keras")
    tokenizer = example.WordPieceTokenizer(example.VOCAB)

    texts = [source for source, _ in example.make_pairs(HELD_OUT, seed=1)]
    sources, _ = example.tokenize_pairs([(t, t) for t in texts], tokenizer, tokenizer, 64)
    source_ids = example.pad(sources)
    batch, width = len(texts), example.MAX_OUTPUT_LENGTH
    state = {"t": ops.convert_to_tensor(0), "prefix": ops.zeros((batch, width), "int32")}
    result = greedy_search(
        prefix_step(model, ops.convert_to_tensor(source_ids, "int32"), width),
        state,
        batch,
        tokenizer.start_id,
        tokenizer.end_id,
        max_length=width,
        pad_id=tokenizer.pad_id,
    )
    ids, lengths = ops.convert_to_numpy(result.ids), ops.convert_to_numpy(result.lengths)
    tokens = [[example.VOCAB[i] for i in row[:n]] for row, n in zip(ids, lengths, strict=True)]
    greedy = {
        "texts": texts,
        "translation": [" ".join(row) for row in tokens],
        "tokens": tokens,
        "scores": ops.convert_to_numpy(result.scores).tolist(),
    }
    (out / "greedy.json").write_text(json.dumps(greedy, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
