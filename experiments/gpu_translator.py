"""Train a Transformer translator on a GPU with JAX, then export and serve it with TensorFlow.

Three stages, the middle one on the GPU machine (JAX, no TensorFlow there):

    python experiments/gpu_translator.py prepare --corpus bible-es-en --data DATA    # TensorFlow
    KERAS_BACKEND=jax python experiments/gpu_translator.py train --data DATA --out TRAINED
    python experiments/gpu_translator.py serve --data DATA --trained TRAINED --out SERVED

`prepare` (TensorFlow, where the corpora are installed) learns a WordPiece vocabulary per side
on the corpus' train split, tokenizes train and dev with the tokenizer the SavedModel will
run, and writes `DATA/source_vocab.txt`, `DATA/target_vocab.txt`, `DATA/ids.npz` and
`DATA/test.json` (the test sources, as the server will receive them, and their normalized
references).

`train` (any Keras backend; meant for JAX on a GPU under `mixed_bfloat16`) builds
`keras_attn.models.transformer_translator`, trains it with `train_on_batch` for `--minutes` of
wall clock (the dev loss picks the weights kept), copies the weights into a float32 model, saves it
as `TRAINED/translator.keras`, and translates the test sources greedily with
`keras_attn.models.TransformerTranslatorSteps` and `keras_attn.decoding.greedy_search` (all
matrix products at full float32 precision), in the batches and with the length limit the
served translator uses. It writes `TRAINED/gpu_translations.json`: the translations, their
token ids and sacreBLEU's corpus BLEU against the references.

`serve` (TensorFlow) exports the `.keras` with `keras_attn.export.export_translator` (greedy,
the same step view), starts `keras-attn serve`, sends the test sources over gRPC in the same
batches, and writes `SERVED/served.json`: the served BLEU next to the GPU's, and how many
translations are identical. Exit status 1 when the two BLEUs differ.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

from keras_attn.formats import MAX_OUTPUT_LENGTH  # the served translator's default

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# One served request per batch of test sentences; the GPU decodes the same batches.
TEST_BATCH = 50
MAX_TOKENS = 128  # tokens kept per side in training, and the served max_source_length
LENGTH_RATIO, LENGTH_OFFSET = 2.0, 10  # the served length limit: ratio * T_x + offset
HEADS, DROPOUT = 4, 0.2  # and d_ff = 4 d_model
START_ID, END_ID, PAD_ID = 2, 3, 0


# -- prepare (TensorFlow) -------------------------------------------------------------------


def prepare(corpus: str, data: Path, vocab_size: int, test_sentences: int | None) -> None:
    from keras_attn.text.corpora import load_corpus
    from keras_attn.text.tokenizer import WordPieceTokenizer
    from keras_attn.text.vocab import build_wordpiece_vocab, save_vocab
    from keras_attn.training.data import tokenize_pairs

    splits = load_corpus(corpus)
    data.mkdir(parents=True, exist_ok=True)
    tokenizers = []
    for side, index in (("source", 0), ("target", 1)):
        vocab = build_wordpiece_vocab([pair[index] for pair in splits["train"]], vocab_size)
        save_vocab(data / f"{side}_vocab.txt", vocab)
        tokenizers.append(WordPieceTokenizer(vocab))
    arrays = {}
    for split in ("train", "dev"):
        sources, targets = tokenize_pairs(splits[split], *tokenizers, max_length=MAX_TOKENS)
        for side, sequences in (("source", sources), ("target", targets)):
            arrays[f"{split}_{side}"] = np.concatenate(sequences).astype(np.int16)
            arrays[f"{split}_{side}_lengths"] = np.array([len(s) for s in sequences], np.int32)
    np.savez_compressed(data / "ids.npz", **arrays)
    test = splits["test"][:test_sentences]
    sources = [source for source, _ in test]
    references = tokenizers[1].normalize([target for _, target in test]).numpy()
    (data / "test.json").write_text(
        json.dumps(
            {
                "corpus": corpus,
                "sources": sources,
                # What the served translator feeds its encoder: the first MAX_TOKENS ids.
                "source_ids": tokenizers[0].tokenize(sources)[:, :MAX_TOKENS].to_list(),
                "references": [reference.decode() for reference in references],
            },
            ensure_ascii=False,
        )
    )
    print(
        f"{corpus}: {len(arrays['train_source_lengths'])} training pairs, "
        f"{len(arrays['dev_source_lengths'])} dev, {len(test)} test; vocabularies of "
        f"{tokenizers[0].vocab_size} and {tokenizers[1].vocab_size} tokens in {data}"
    )


# -- train (any backend) --------------------------------------------------------------------
# The helpers below stand in for keras_attn's `text.vocab.load_vocab`, `training.data.pad`,
# `WordPieceTokenizer.detokenize` and `training.metrics.corpus_bleu`: those modules import
# TensorFlow, which the GPU machine does not have. The smoke test checks `detokenize` against
# what the SavedModel serves.


def read_vocab(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def split_ragged(flat: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    return np.split(flat.astype(np.int32), np.cumsum(lengths)[:-1])


def padded(sequences, width: int) -> np.ndarray:
    out = np.full((len(sequences), width), PAD_ID, np.int32)
    for row, sequence in enumerate(sequences):
        out[row, : len(sequence)] = sequence
    return out


def detokenize(ids, vocab: list[str]) -> str:
    """The served `translation` of `ids`: cut at END, WordPiece `##` pieces merged into their
    word, no space before `.,!?;:` nor after `¿¡` (what `WordPieceTokenizer.detokenize` does)."""
    words: list[str] = []
    for token_id in ids:
        if token_id == END_ID:
            break
        if token_id in (PAD_ID, START_ID):
            continue
        token = vocab[token_id]
        if token.startswith("##") and words:
            words[-1] += token[2:]
        else:
            words.append(token)
    text = re.sub(r" ([.,!?;:])", r"\1", " ".join(words))
    return re.sub(r"([¿¡]) ", r"\1", text)


def corpus_bleu(hypotheses: list[str], references: list[str]) -> float:
    import sacrebleu

    return float(sacrebleu.corpus_bleu(hypotheses, [references]).score)


def batches(sources, targets, batch_size: int, rng: np.random.Generator):
    """Training batches `(inputs, labels)` in a new random order: every batch `batch_size` rows
    (the last one topped up from the first) and `MAX_TOKENS` wide, so a compiled step sees one
    shape; a target has START and END around its `MAX_TOKENS` ids at most."""
    order = rng.permutation(len(sources))
    order = np.concatenate([order, order[: -len(order) % batch_size]])
    for offset in range(0, len(order), batch_size):
        rows = order[offset : offset + batch_size]
        target = padded([targets[i] for i in rows], MAX_TOKENS + 2)
        inputs = {
            "source_ids": padded([sources[i] for i in rows], MAX_TOKENS),
            "target_ids": target[:, :-1],
        }
        yield inputs, target[:, 1:]


def train(
    data: Path,
    out: Path,
    minutes: float,
    batch_size: int,
    policy: str,
    seed: int,
    num_layers: int = 4,
    d_model: int = 256,
) -> None:
    import keras

    from keras_attn.models import transformer_translator

    out.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(seed)
    source_vocab, target_vocab = (read_vocab(data / f"{s}_vocab.txt") for s in ("source", "target"))
    arrays = np.load(data / "ids.npz")
    ragged = {
        key: split_ragged(arrays[key], arrays[f"{key}_lengths"])
        for key in ("train_source", "train_target", "dev_source", "dev_target")
    }
    shape = dict(num_layers=num_layers, d_model=d_model, num_heads=HEADS, ff_dim=4 * d_model)
    sizes = dict(
        source_vocab_size=len(source_vocab),
        target_vocab_size=len(target_vocab),
        dropout=DROPOUT,
        **shape,
    )

    keras.config.set_dtype_policy(policy)
    model = transformer_translator(**sizes)
    model.compile(
        optimizer=keras.optimizers.Adam(
            keras.optimizers.schedules.CosineDecay(
                0.0, decay_steps=20_000, alpha=0.05, warmup_target=7e-4, warmup_steps=400
            ),
            beta_2=0.98,
            clipnorm=1.0,
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=PAD_ID),
    )
    rng = np.random.default_rng(seed)
    dev = list(batches(ragged["dev_source"], ragged["dev_target"], 256, rng))
    deadline = time.monotonic() + 60 * minutes
    history, best, best_weights, steps = [], float("inf"), None, 0
    started = time.monotonic()
    while True:  # at least one (partial) pass, then until the deadline
        for inputs, labels in batches(
            ragged["train_source"], ragged["train_target"], batch_size, rng
        ):
            loss = model.train_on_batch(inputs, labels)
            steps += 1
            if time.monotonic() >= deadline:
                break
        dev_loss = float(np.mean([model.test_on_batch(x, y) for x, y in dev]))
        history.append(
            {
                "steps": steps,
                "seconds": round(time.monotonic() - started, 1),
                "train_loss": float(loss),
                "dev_loss": dev_loss,
            }
        )
        print(
            f"epoch {len(history)}: {steps} steps, {history[-1]['seconds']} s, "
            f"train loss {float(loss):.3f}, dev loss {dev_loss:.3f}",
            flush=True,
        )
        if best_weights is None or dev_loss < best:
            best, best_weights = dev_loss, [keras.ops.convert_to_numpy(w) for w in model.weights]
        if time.monotonic() >= deadline:
            break

    keras.config.set_dtype_policy("float32")
    served = transformer_translator(**sizes)
    served.set_weights(best_weights)
    served.save(out / "translator.keras")
    test = json.loads((data / "test.json").read_text(encoding="utf-8"))
    ids = translate(served, test["source_ids"])
    hypotheses = [detokenize(row, target_vocab) for row in ids]
    result = {
        "backend": keras.backend.backend(),
        "device": device_name(),
        "policy": policy,
        "model": {**shape, "dropout": DROPOUT},
        "batch_size": batch_size,
        "train_seconds": round(time.monotonic() - started, 1),
        "steps": steps,
        "epochs": history,
        "best_dev_loss": best,
        "bleu": corpus_bleu(hypotheses, test["references"]),
        "translations": hypotheses,
        "ids": [list(map(int, row)) for row in ids],
    }
    (out / "gpu_translations.json").write_text(json.dumps(result, ensure_ascii=False))
    print(f"test BLEU {result['bleu']:.2f} ({len(hypotheses)} sentences, greedy, float32)")


def length_limit(source_length: int) -> int:
    """The served translator's limit on generated tokens for a batch `source_length` wide."""
    return min(MAX_OUTPUT_LENGTH, int(LENGTH_RATIO * source_length) + LENGTH_OFFSET)


def translate(model, source_ids: list[list[int]]) -> list[list[int]]:
    """Greedy translations (token ids, END included) of `source_ids`, `TEST_BATCH` sentences
    at a time, each batch limited as the served translator limits it.

    Every batch is padded to the same shape (rows and source positions: padded positions are
    masked), so under JAX one compiled program decodes them all; matrix products run at full
    float32 precision (no TF32 on a GPU)."""
    import keras

    from keras_attn.decoding import greedy_search
    from keras_attn.models import TransformerTranslatorSteps

    steps = TransformerTranslatorSteps(model, max_length=MAX_OUTPUT_LENGTH)

    def decode(source, limit):
        result = greedy_search(
            steps.step,
            steps.encode(source),
            TEST_BATCH,
            START_ID,
            END_ID,
            max_length=MAX_OUTPUT_LENGTH,
            pad_id=PAD_ID,
            length_limit=limit,
        )
        return result.ids, result.lengths

    if keras.backend.backend() == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "highest")
        decode = jax.jit(decode)
    width = max(1, max(len(ids) for ids in source_ids))
    translations = []
    for offset in range(0, len(source_ids), TEST_BATCH):
        rows = source_ids[offset : offset + TEST_BATCH]
        filled = rows + [rows[0]] * (TEST_BATCH - len(rows))  # dropped after decoding
        limit = length_limit(max(1, max(len(ids) for ids in rows)))
        ids, lengths = decode(padded(filled, width), np.int32(limit))
        ids, lengths = keras.ops.convert_to_numpy(ids), keras.ops.convert_to_numpy(lengths)
        translations += [ids[row, : lengths[row]].tolist() for row in range(len(rows))]
    return translations


def device_name() -> str:
    import keras

    if keras.backend.backend() == "jax":
        import jax

        return jax.devices()[0].device_kind
    import platform

    return platform.processor() or platform.machine()


# -- serve (TensorFlow) ---------------------------------------------------------------------


def serve(data: Path, trained: Path, out: Path) -> int:
    import keras

    from keras_attn.export import export_translator
    from keras_attn.models import TransformerTranslatorSteps
    from keras_attn.serving.client import TranslatorClient
    from keras_attn.testing.server_process import serve_in_subprocess

    gpu = json.loads((trained / "gpu_translations.json").read_text(encoding="utf-8"))
    test = json.loads((data / "test.json").read_text(encoding="utf-8"))
    model = keras.saving.load_model(trained / "translator.keras")
    out.mkdir(parents=True, exist_ok=True)
    base = out / "models" / "translator"
    started = time.monotonic()
    version = export_translator(
        model,
        data / "source_vocab.txt",
        data / "target_vocab.txt",
        base,
        steps=TransformerTranslatorSteps(model, max_length=MAX_OUTPUT_LENGTH),
        max_source_length=MAX_TOKENS,
        max_output_length=MAX_OUTPUT_LENGTH,
    )
    exported = time.monotonic() - started
    translations = []
    with (
        serve_in_subprocess(base) as server,
        TranslatorClient(server.target, "translator", timeout=600) as client,
    ):
        for offset in range(0, len(test["sources"]), TEST_BATCH):
            answer = client.predict(test["sources"][offset : offset + TEST_BATCH], "translate")
            translations += [t if isinstance(t, str) else t.decode() for t in answer["translation"]]
    same = sum(a == b for a, b in zip(translations, gpu["translations"], strict=True))
    result = {
        "corpus": test["corpus"],
        "sentences": len(translations),
        "gpu_device": gpu["device"],
        "gpu_bleu": gpu["bleu"],
        "served_bleu": corpus_bleu(translations, test["references"]),
        "identical_translations": same,
        "export_seconds": round(exported, 1),
        "version": str(version),
    }
    (out / "served.json").write_text(
        json.dumps({**result, "translations": translations}, ensure_ascii=False)
    )
    print(json.dumps(result, indent=1))
    return 0 if abs(result["served_bleu"] - result["gpu_bleu"]) < 1e-9 else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    stages = parser.add_subparsers(dest="stage", required=True)
    first = stages.add_parser("prepare", help="vocabularies and token ids (TensorFlow)")
    first.add_argument("--corpus", default="bible-es-en")
    first.add_argument("--data", type=Path, required=True)
    first.add_argument("--vocab-size", type=int, default=8000)
    first.add_argument("--test-sentences", type=int, default=None, help="default: all")
    second = stages.add_parser("train", help="train, save, translate the test split (any backend)")
    second.add_argument("--data", type=Path, required=True)
    second.add_argument("--out", type=Path, required=True)
    second.add_argument("--minutes", type=float, default=5.0)
    second.add_argument("--batch-size", type=int, default=256)
    second.add_argument("--policy", default="mixed_bfloat16")
    second.add_argument("--seed", type=int, default=0)
    second.add_argument("--num-layers", type=int, default=4, help="encoder and decoder blocks")
    second.add_argument("--d-model", type=int, default=256, help="width (4 heads, d_ff = 4 d)")
    third = stages.add_parser("serve", help="export, serve, compare (TensorFlow)")
    third.add_argument("--data", type=Path, required=True)
    third.add_argument("--trained", type=Path, required=True)
    third.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.stage == "prepare":
        prepare(args.corpus, args.data, args.vocab_size, args.test_sentences)
    elif args.stage == "train":
        train(
            args.data,
            args.out,
            args.minutes,
            args.batch_size,
            args.policy,
            args.seed,
            args.num_layers,
            args.d_model,
        )
    else:
        return serve(args.data, args.trained, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
