"""Bring your own model: a functional-API translator trained with `model.fit`, exported, served.

    python examples/own_translator.py --out own_translator

1. Build a translator with the Keras functional API from keras_attn layers: a bidirectional LSTM
   encoder (`BidirectionalEncoder`) and an LSTM decoder with additive attention
   (`BahdanauDecoder`, Bahdanau et al., 2015), as in README.md.
2. Train it with `model.fit` on a generated task: write a sequence of 2 to 6 words backwards.
   Teacher forcing: the decoder reads START and the target, and learns to predict the target and
   END, the same ids shifted by one position; padding is left out of the loss.
3. Export it with `keras_attn.export.export_translator`: tokenization and beam search inside
   the graph, no step view of our own (the model is rerun on the target prefix at each step).
4. Serve it with `keras-attn serve` and ask over gRPC and REST; both answers equal the
   translations decoded in this process.

`--train-only` stops after step 2, with `translator.keras` and `vocab.txt` written: steps 1 and 2
run under any Keras backend (`KERAS_BACKEND=jax python examples/own_translator.py --train-only`),
and `keras-attn export --keras-model` exports the saved model under TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import urllib.request
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_attn.export import PrefixSteps, export_translator
from keras_attn.export.translator import Translator
from keras_attn.layers import BahdanauDecoder, BidirectionalEncoder
from keras_attn.serving.client import TranslatorClient
from keras_attn.testing.server_process import serve_in_subprocess
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import RESERVED_TOKENS, save_vocab
from keras_attn.training.data import pad, tokenize_pairs

WORDS = "red green blue black white cat dog bird fish tree sun moon".split()
# [PAD] [UNK] [START] [END] first (ids 0-3), then one token per word; source and target alike.
VOCAB = RESERVED_TOKENS + WORDS
MAX_WORDS = 6
MAX_OUTPUT_LENGTH = MAX_WORDS + 4  # the longest answer, END included, with room to spare
MARKER = ".keras-attn-own-translator"


def make_pairs(count: int, seed: int) -> list[tuple[str, str]]:
    """`count` pairs `(words, the same words backwards)` of 2 to `MAX_WORDS` words."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(count):
        words = list(rng.choice(WORDS, size=rng.integers(2, MAX_WORDS + 1)))
        pairs.append((" ".join(words), " ".join(reversed(words))))
    return pairs


def build_translator(vocab_size: int, units: int = 32, embedding_dim: int = 16) -> keras.Model:
    """`(source_ids, target_ids)` → next-token logits `(batch, T_y, vocab_size)`."""
    source = keras.Input((None,), dtype="int32", name="source_ids")
    target = keras.Input((None,), dtype="int32", name="target_ids")
    embedded_source = keras.layers.Embedding(vocab_size, embedding_dim, mask_zero=True)(source)
    memory, h, c = BidirectionalEncoder(units)(embedded_source)  # h, c: both directions
    embedded_target = keras.layers.Embedding(vocab_size, embedding_dim, mask_zero=True)(target)
    decoded = BahdanauDecoder(2 * units, score="additive")(
        embedded_target, memory, initial_state=[h, c]
    )
    return keras.Model([source, target], keras.layers.Dense(vocab_size)(decoded))


def teacher_forcing(pairs, tokenizer) -> tuple[dict, np.ndarray]:
    """The model's inputs and labels: targets are START … END, the decoder reads all but the
    last id and learns the next one at every position (labels = the targets shifted by one)."""
    sources, targets = tokenize_pairs(pairs, tokenizer, tokenizer, max_length=MAX_WORDS)
    targets = pad(targets)  # (batch, T_y + 1), PAD (0) after END
    inputs = {"source_ids": pad(sources), "target_ids": targets[:, :-1]}  # START w1 … wn
    return inputs, targets[:, 1:]  # w1 … wn END: PAD labels count for nothing in the loss


def train(model: keras.Model, pairs, tokenizer, epochs: int, batch_size: int = 32) -> dict:
    """`model.fit` with the padding-masked cross-entropy; returns the last epoch's metrics."""
    inputs, labels = teacher_forcing(pairs, tokenizer)
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        # The mean over the labels that are not PAD (id 0); on logits, hence from_logits.
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
    )
    history = model.fit(inputs, labels, batch_size=batch_size, epochs=epochs, verbose=0)
    return {name: float(values[-1]) for name, values in history.history.items()}


def in_process_translator(model: keras.Model, beam_size: int) -> Translator:
    """The exported graph's translator, in this process (what `export_translator` builds)."""
    tokenizer = WordPieceTokenizer(VOCAB)
    return Translator(
        model,
        PrefixSteps(model, MAX_OUTPUT_LENGTH),
        tokenizer,
        tokenizer,
        max_output_length=MAX_OUTPUT_LENGTH,
        decoder="beam",
        beam_size=beam_size,
    )


def ask_over_grpc(target: str, texts: list[str]) -> dict:
    """The `translate` signature's outputs, over gRPC."""
    with TranslatorClient(target, "translator", timeout=60) as client:
        return client.predict(texts, "translate")


def ask_over_rest(port: int, texts: list[str]) -> dict:
    """The `translate` signature's outputs, over REST (TF Serving's columnar JSON format)."""
    body = json.dumps({"signature_name": "translate", "inputs": {"text": texts}}).encode()
    url = f"http://127.0.0.1:{port}/v1/models/translator:predict"
    with urllib.request.urlopen(url, body, timeout=60) as answer:
        return json.loads(answer.read())["outputs"]


def serve_and_ask(model_base_path: Path, texts: list[str]) -> dict:
    """`keras-attn serve` on free ports; the gRPC and the REST answers to `texts`."""
    with serve_in_subprocess(model_base_path, rest_api=True) as server:
        return {
            "grpc": ask_over_grpc(server.target, texts),
            "rest": ask_over_rest(server.rest_port, texts),
        }


def as_lists(outputs: dict) -> dict:
    """`translation`, `tokens` (as str) and `scores` of any answer, as nested lists."""

    def text(value):
        return value.decode() if isinstance(value, bytes) else value

    outputs = {name: np.asarray(value).tolist() for name, value in outputs.items()}
    return {
        "translation": [text(t) for t in outputs["translation"]],
        "tokens": [[text(t) for t in row] for row in outputs["tokens"]],
        "scores": outputs["scores"],
    }


def same_answers(answer: dict, expected: dict) -> bool:
    """Equal translations and tokens, and scores equal up to float32 round-off."""
    return (
        answer["translation"] == expected["translation"]
        and answer["tokens"] == expected["tokens"]
        and bool(np.allclose(answer["scores"], expected["scores"], rtol=1e-5, atol=1e-5))
    )


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="own_translator", help="output directory (recreated)")
    parser.add_argument("--pairs", type=int, default=3000, help="training pairs")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--units", type=int, default=32)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--train-only", action="store_true", help="stop once translator.keras and vocab.txt exist"
    )
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    if out.exists():
        if not (out / MARKER).exists():
            print(f"{out} exists and was not made by this example; choose another --out")
            return 2
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).touch()
    keras.utils.set_random_seed(args.seed)

    tokenizer = WordPieceTokenizer(VOCAB)
    model = build_translator(tokenizer.vocab_size, units=args.units)
    metrics = train(model, make_pairs(args.pairs, args.seed), tokenizer, args.epochs)
    print(f"trained {args.epochs} epochs: loss {metrics['loss']:.4f}")

    save_vocab(out / "vocab.txt", VOCAB)
    model.save(out / "translator.keras")
    if args.train_only:
        print(f"saved {out / 'translator.keras'} and {out / 'vocab.txt'}")
        return 0
    version = export_translator(
        model,
        VOCAB,  # a token list or a vocabulary file: out / "vocab.txt" works alike
        VOCAB,
        out / "models" / "translator",
        decoder="beam",
        beam_size=args.beam_size,
        max_output_length=MAX_OUTPUT_LENGTH,
    )
    print(f"exported {version}")

    held_out = make_pairs(50, args.seed + 1)
    texts = [source for source, _ in held_out]
    translator = in_process_translator(model, args.beam_size)
    local = as_lists(translator.translate(tf.constant(texts)))
    answers = serve_and_ask(out / "models" / "translator", texts)
    over_grpc, over_rest = as_lists(answers["grpc"]), as_lists(answers["rest"])
    for (source, _), translation in list(zip(held_out, over_grpc["translation"], strict=True))[:4]:
        print(f"  {source}  →  {translation}")
    results = {
        "exact_match": float(
            np.mean([t == r for t, (_, r) in zip(over_grpc["translation"], held_out, strict=True)])
        ),
        "grpc_equals_in_process": same_answers(over_grpc, local),
        "rest_equals_in_process": same_answers(over_rest, local),
    }
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"held-out exact match {results['exact_match']:.0%}; gRPC and REST answers equal the "
        f"in-process translations: {results['grpc_equals_in_process']} and "
        f"{results['rest_equals_in_process']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
