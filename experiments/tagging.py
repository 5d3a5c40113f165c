"""Does pre-training help a tagger with few labelled sentences? BART pre-trained vs from scratch.

Pre-trains a small BART (denoising: text infilling and sentence permutation, Lewis et al., 2019,
arXiv:1910.13461) on the English side of the `synthetic` corpus' training split, then fine-tunes
`bart-tagger` (each token's top decoder state classified, Lewis et al., section 3.2) on
`synthetic-tags` — the word class of every word of the same generated English (DET, NOUN, VERB,
AUX, PRON, ...; `keras_attn.text.synthetic.generate_tagged`) — with the first N of its training
sentences (shuffled by the seed), for every budget N and seed, in two arms with the same steps,
batch, peak rate, warm-up and cosine schedule:

- `BART pre-trained`: `bart-tagger` started from the BART's weights and vocabulary (`init_from`);
- `BART from scratch`: the same tagger from random weights, with the BART's vocabulary
  (`vocab_from`);

and, as a reference line, each word's most frequent tag in the same labelled sentences (a word
they lack gets their most frequent tag).

The tagging dev and test sentences are never part of the pre-training text (`synthetic-tags`
keeps out of them every sentence of the corpus' training split). Reports dev and test token
accuracy (each word scored once, on its first piece) per arm and budget, mean over the seeds
with their range, and the gain of the pre-trained mean over the scratch one against the seed
spread.

Writes into `--out`: `pretrain/bart` (the pre-training run), `BUDGET/ARM-sSEED` (one run per
fine-tuning cell), `results.json` and `results.md`. A run directory whose `metrics.json` exists
is not trained again; one that was killed is resumed.

    nice -n 19 python experiments/tagging.py --out tagging-runs
    python experiments/tagging.py --quick --out /tmp/tagging-smoke
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

sys.path.insert(0, str(Path(__file__).resolve().parent))  # to import pretraining.py

from pretraining import gain, summarize, train_run  # noqa: E402

from keras_attn.text.classification import load_tagging_data  # noqa: E402
from keras_attn.training.trainer import TrainConfig  # noqa: E402

CORPUS = "synthetic-tags"
ARMS = {"BART pre-trained": "init_from", "BART from scratch": "vocab_from"}
REFERENCE = "word's most frequent tag"
METRICS = {"dev": "dev_accuracy", "test": "test_accuracy"}


@dataclasses.dataclass(frozen=True)
class Scale:
    """Model size and budgets of one experiment (`FULL` or `QUICK`)."""

    model: dict  # num_layers, d_model, num_heads, ff_dim of the BART (encoder and decoder)
    vocab_size: int
    max_length: int
    pretraining_steps: int  # the pre-training run's step target
    pretraining_cpu_minutes: float | None  # and its CPU-time budget (the first reached ends it)
    pretraining_batch_size: int
    budgets: tuple[int, ...]  # labelled training sentences
    steps: int  # fine-tuning steps
    batch_size: int  # fine-tuning batch
    eval_sentences: int  # dev sentences scored per fine-tuning run (test: all of them)


FULL = Scale(
    model={"num_layers": 2, "d_model": 64, "num_heads": 4, "ff_dim": 128},
    vocab_size=1000,
    max_length=48,
    pretraining_steps=4000,
    pretraining_cpu_minutes=1.0,
    pretraining_batch_size=32,
    budgets=(50, 200),
    steps=150,
    batch_size=16,
    eval_sentences=500,
)
QUICK = Scale(
    model={"num_layers": 1, "d_model": 16, "num_heads": 2, "ff_dim": 32},
    vocab_size=200,
    max_length=32,
    pretraining_steps=4,
    pretraining_cpu_minutes=None,
    pretraining_batch_size=8,
    budgets=(20,),
    steps=3,
    batch_size=8,
    eval_sentences=10,
)


def pretraining_config(scale: Scale, args: argparse.Namespace) -> TrainConfig:
    """The BART pre-training run: denoising of the English side of `synthetic`."""
    return TrainConfig(
        model="bart",
        corpus="synthetic",
        side="target",
        steps=scale.pretraining_steps,
        batch_size=scale.pretraining_batch_size,
        learning_rate=1e-3,
        warmup_steps=min(100, scale.pretraining_steps // 2),
        schedule="inverse-sqrt",
        vocab_size=scale.vocab_size,
        max_length=scale.max_length,
        seed=0,
        eval_sentences=min(200, 10 * scale.eval_sentences),
        checkpoint_every=max(1, scale.pretraining_steps // 20),
        max_cpu_minutes=scale.pretraining_cpu_minutes,
        options=scale.model,
    )


def finetuning_config(
    arm: str, budget: int, seed: int, scale: Scale, args: argparse.Namespace, out: Path
) -> TrainConfig:
    """One fine-tuning cell: the arms differ in `init_from` / `vocab_from` only."""
    return TrainConfig(
        model="bart-tagger",
        corpus=CORPUS,
        train_examples=budget,
        steps=scale.steps,
        batch_size=scale.batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=min(args.warmup_steps, scale.steps // 2),
        schedule="cosine",
        vocab_size=scale.vocab_size,
        max_length=scale.max_length,
        seed=seed,
        eval_sentences=scale.eval_sentences,
        checkpoint_every=scale.steps,
        options=scale.model,
        **{ARMS[arm]: str(out / "pretrain" / "bart")},
    )


def most_frequent_tag_accuracy(train: Sequence, evaluated: Sequence) -> float:
    """Token accuracy of tagging each word (case folded) with its most frequent tag in `train`,
    a word `train` lacks with `train`'s most frequent tag; `(tokens, tags)` sentences."""
    counts: dict[str, Counter] = {}
    for tokens, tags in train:
        for token, tag in zip(tokens, tags, strict=True):
            counts.setdefault(token.lower(), Counter())[tag] += 1
    overall = Counter(tag for _, tags in train for tag in tags).most_common(1)[0][0]
    guesses = [
        (counts[token.lower()].most_common(1)[0][0] if token.lower() in counts else overall) == tag
        for tokens, tags in evaluated
        for token, tag in zip(tokens, tags, strict=True)
    ]
    return sum(guesses) / len(guesses)


def reference_results(budgets: Sequence[int], seeds: Sequence[int], scale: Scale) -> list[dict]:
    """The reference line's dev and test accuracy, as the trainer's runs see the data: the first
    `budget` training sentences of the seed's order, the first `eval_sentences` dev sentences,
    every test sentence."""
    results = []
    for seed in seeds:
        data = load_tagging_data(CORPUS, seed)
        for budget in budgets:
            train = data.train[:budget]
            metrics = {
                METRICS["dev"]: most_frequent_tag_accuracy(train, data.dev[: scale.eval_sentences]),
                METRICS["test"]: most_frequent_tag_accuracy(train, data.test),
            }
            results.append({"arm": REFERENCE, "budget": budget, "seed": seed, "metrics": metrics})
    return results


def cell_directory(out: Path, arm: str, budget: int, seed: int) -> Path:
    slug = arm.lower().replace(" ", "-")
    return out / str(budget) / f"{slug}-s{seed}"


def format_table(results: Sequence[dict], budgets: Sequence[int]) -> str:
    """A row per arm and budget: dev and test token accuracy %, mean over seeds (range); then a
    gain row per budget, pre-trained minus from scratch against the seed spread."""
    lines = [
        "| arm | labelled sentences | dev token accuracy % | test token accuracy % |",
        "|---|---:|---:|---:|",
    ]

    def values(arm, budget, split):
        return [
            r["metrics"][METRICS[split]]
            for r in results
            if r["arm"] == arm and r["budget"] == budget
        ]

    for budget in budgets:
        for arm in (*ARMS, REFERENCE):
            if not values(arm, budget, "dev"):
                continue
            cells = []
            for split in METRICS:
                s = summarize(values(arm, budget, split))
                cells.append(f"{100 * s['mean']:.1f} ({100 * s['min']:.1f}–{100 * s['max']:.1f})")
            lines.append(f"| {arm} | {budget} | " + " | ".join(cells) + " |")
        cells = []
        for split in METRICS:
            g = gain(*(values(arm, budget, split) for arm in ARMS))
            verdict = ">" if g["exceeds"] else "≤"
            cells.append(f"{100 * g['gain']:+.1f} {verdict} {100 * g['spread']:.1f}")
        lines.append(
            f"| gain pre-trained − from scratch (vs spread) | {budget} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def format_pretraining(metrics: dict, scale: Scale) -> str:
    return (
        "| pre-training run | steps | train wall s | train CPU s | dev token accuracy | "
        "dev perplexity |\n|---|---:|---:|---:|---:|---:|\n"
        f"| bart, synthetic (target) | {metrics['steps']} | "
        f"{metrics['train_seconds_this_session']} | "
        f"{metrics['train_cpu_seconds_this_session']} | {metrics.get('dev_token_accuracy')} | "
        f"{metrics.get('dev_perplexity')} |"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument(
        "--quick", action="store_true", help="a tiny model and a few steps (a smoke test)"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument(
        "--budgets", nargs="+", type=int, help="labelled sentences (default: the scale's)"
    )
    parser.add_argument(
        "--learning-rate", type=float, default=5e-4, help="fine-tuning peak rate, both arms"
    )
    parser.add_argument("--warmup-steps", type=int, default=30, help="fine-tuning warm-up")
    args = parser.parse_args(argv)
    if len(set(args.seeds)) < 2:
        parser.error(f"--seeds needs at least two different seeds, got {args.seeds}")
    args.scale = QUICK if args.quick else FULL
    if args.budgets:
        args.scale = dataclasses.replace(args.scale, budgets=tuple(args.budgets))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    scale = args.scale
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    log(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; seeds {args.seeds}")
    cpu = time.process_time()
    pretrained = train_run(out / "pretrain" / "bart", pretraining_config(scale, args), log)
    results = []
    for budget in scale.budgets:
        for arm in ARMS:
            for seed in args.seeds:
                run_dir = cell_directory(out, arm, budget, seed)
                config = finetuning_config(arm, budget, seed, scale, args, out)
                metrics = train_run(run_dir, config, log)
                log(
                    f"{arm} / {budget} / seed {seed}: dev {metrics['dev_accuracy']} "
                    f"test {metrics['test_accuracy']}"
                )
                results.append({"arm": arm, "budget": budget, "seed": seed, "metrics": metrics})
    results += reference_results(scale.budgets, args.seeds, scale)
    markdown = (
        "#### Pre-training\n\n"
        + format_pretraining(pretrained, scale)
        + f"\n\n#### {CORPUS}: token accuracy\n\n"
        + format_table(results, scale.budgets)
        + "\n"
    )
    (out / "results.md").write_text(markdown, encoding="utf-8")
    record = {
        "argv": sys.argv[1:] if argv is None else list(argv),
        "scale": dataclasses.asdict(scale),
        "pretraining": pretrained,
        "results": results,
        "process_cpu_seconds": round(time.process_time() - cpu, 1),
    }
    (out / "results.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print("\n" + markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
