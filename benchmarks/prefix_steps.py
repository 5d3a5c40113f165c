"""The generic prefix step view against the cached RNN step view, on the same trained translator.

    python benchmarks/prefix_steps.py [--quick] [--run RUN]

An `rnn-attention` translator (by default trained for a few hundred steps with `keras-attn train`
on the synthetic corpus into a temporary directory; `--run` reuses a run) is decoded two ways in
this process, each as a `keras_attn.export.translator.Translator`, the object the exported
signatures wrap:

- `cached`: `keras_attn.models.RNNTranslatorSteps`, which encodes the source once and advances
  the decoder's LSTM state by one token per step;
- `prefix`: `keras_attn.export.PrefixSteps`, which reruns the whole model (encoder and decoder)
  on the source and a target buffer of `--max-output-length` ids at every step — what
  `keras_attn.export.export_translator` uses for a model without a step view of its own.

For the greedy and the beam-4 decoder, batches of `--batch-size` test-split sentences are
translated by each view; the translations of both are checked equal first. Every variant is
warmed up (tracing is not timed), then the variants are timed round-robin. Reported: the median
milliseconds per batch and `prefix / cached` (the median over rounds of the per-round ratio; above
1, the cached view is that many times faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

CACHED, PREFIX = "cached", "prefix"
DECODERS = {"greedy": {"decoder": "greedy"}, "beam 4": {"decoder": "beam", "beam_size": 4}}
TRAIN_FLAGS = (
    "--model", "rnn-attention", "--corpus", "synthetic", "--batch-size", "64",
    "--eval-sentences", "0", "--checkpoint-every", "100000", "--quiet",
)  # fmt: skip


def train_run(out: Path, steps: int, units: int) -> Path:
    """`keras-attn train` an rnn-attention translator into `out`; returns the run directory."""
    command = [sys.executable, "-m", "keras_attn.cli", "train", *TRAIN_FLAGS]
    command += ["--steps", str(steps), "--units", str(units), "--out", str(out)]
    subprocess.run(command, check=True)
    return out


def translators(model, source_tokenizer, target_tokenizer, max_output_length: int, **decoder):
    """`{CACHED: Translator, PREFIX: Translator}` over the same `model`, with `decoder` options."""
    from keras_attn.export import PrefixSteps
    from keras_attn.export.translator import Translator
    from keras_attn.models import RNNTranslatorSteps

    views = {
        CACHED: RNNTranslatorSteps(model),
        PREFIX: PrefixSteps(
            model, max_output_length, source_vocab_size=source_tokenizer.vocab_size
        ),
    }
    return {
        name: Translator(
            model,
            steps,
            source_tokenizer,
            target_tokenizer,
            max_output_length=max_output_length,
            **decoder,
        )
        for name, steps in views.items()
    }


def time_round_robin(
    calls: dict[str, Callable[[], object]],
    rounds: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Each call once untimed, then `rounds` rounds of every call in turn; seconds per call."""
    for call in calls.values():
        call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = clock()
            call()
            times[name].append(clock() - start)
    return times


def summarize(times: dict[str, list[float]]) -> dict[str, float]:
    """Median milliseconds of each variant and `prefix / cached`, the median per-round ratio."""
    summary = {f"{name} ms": 1e3 * statistics.median(values) for name, values in times.items()}
    ratios = [p / c for p, c in zip(times[PREFIX], times[CACHED], strict=True)]
    summary["prefix / cached"] = statistics.median(ratios)
    return summary


def compare(
    translators_by_decoder: dict[str, dict], texts: Sequence[str], batch_size: int, rounds: int
) -> dict[str, dict[str, float]]:
    """For each decoder: check both views translate `texts` alike, then time them by batches."""
    import numpy as np
    import tensorflow as tf

    batches = [tf.constant(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
    results = {}
    for decoder, pair in translators_by_decoder.items():
        outputs = {name: [t.translate(b)["translation"].numpy() for b in batches] for name, t in
                   pair.items()}  # fmt: skip
        same = sum(
            int(np.sum(c == p)) for c, p in zip(outputs[CACHED], outputs[PREFIX], strict=True)
        )

        def run(translator):
            return lambda: [translator.translate(batch) for batch in batches]

        times = time_round_robin({name: run(t) for name, t in pair.items()}, rounds)
        results[decoder] = {**summarize(times), "equal translations": same / len(texts)}
    return results


def format_table(results: dict[str, dict[str, float]], setting: str) -> str:
    lines = [
        f"prefix (generic) vs cached (RNNTranslatorSteps) step view, {setting}",
        f"{'decoder':<10}{'cached ms':>12}{'prefix ms':>12}{'prefix / cached':>18}"
        f"{'equal translations':>20}",
    ]
    for decoder, row in results.items():
        lines.append(
            f"{decoder:<10}{row['cached ms']:>12.1f}{row['prefix ms']:>12.1f}"
            f"{row['prefix / cached']:>17.2f}x{row['equal translations']:>19.0%}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller model, fewer rounds")
    parser.add_argument("--run", type=Path, default=None, help="an rnn-attention run to reuse")
    parser.add_argument("--max-output-length", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args(argv)
    steps, units, rounds, sentences = (200, 64, 5, 32) if args.quick else (1000, 256, 15, 64)

    with tempfile.TemporaryDirectory() as scratch:
        run_path = args.run or train_run(Path(scratch) / "run", steps, units)
        from keras_attn.text.corpora import load_corpus
        from keras_attn.training.trainer import RunDirectory

        run = RunDirectory(run_path)
        model = run.load_model()
        source_tokenizer, target_tokenizer = run.tokenizers()
        texts = [source for source, _ in load_corpus("synthetic")["test"][:sentences]]
        pairs = {
            decoder: translators(
                model, source_tokenizer, target_tokenizer, args.max_output_length, **options
            )
            for decoder, options in DECODERS.items()
        }
        results = compare(pairs, texts, args.batch_size, rounds)
    setting = (
        f"{len(texts)} sentences in batches of {args.batch_size}, max_output_length "
        f"{args.max_output_length}, {rounds} rounds"
    )
    print(format_table(results, setting))
    return 0


if __name__ == "__main__":
    sys.exit(main())
