"""Does pre-training pay where labelled examples are few? Pre-trained vs from-scratch, measured.

Pre-trains three small models on the monolingual text of the installed corpora
(`keras_attn.training.trainer.train`, one run each): a BERT (masked LM + next-sentence
prediction, Devlin et al., 2018, arXiv:1810.04805) and a GPT (causal LM, Radford et al., 2018) on
`ding-de-en`, `bible-es-en` and `libreoffice-es-en`, and an mBART (denoising of Spanish and
English text with a language tag per sentence, Lewis et al., 2019, arXiv:1910.13461; Liu et al.,
2020, arXiv:2001.08210) on `bible-es-en` and `libreoffice-es-en`. The dev and test sentences of
the corpora are never part of the pre-training text. Each pre-training run first stops at
`--short-fraction` of its steps (kept as the `-short` run: the same run, stopped earlier), then
continues to its full length; the schedule (inverse square root) does not depend on the step
target, so the short run is exactly the long run's prefix.

Then fine-tunes, for every training budget and seed, with the same steps, batch and learning-rate
schedule in both arms of a comparison:

- classification on `source-id` (is an English sentence a dictionary example, a Bible verse or
  a help paragraph?) with N training sentences per class: `bert-classifier` started from the BERT
  (`init_from`) vs the same classifier from scratch with the same vocabulary (`vocab_from`); the
  same for `gpt-classifier`; `text-cnn` from scratch as the reference line. Test accuracy.
- translation on `libreoffice-es-en` with the first N training pairs: `bart-translator` started
  from the mBART vs the same translator from scratch (mBART's vocabulary), and `bertsum` (the
  BERT as encoder, a new decoder; the encoder on its own, smaller learning rate and longer
  warm-up, Liu & Lapata, 2019, arXiv:1908.08345). Dev BLEU (greedy).

At the smallest budget the classifiers and the translator are also fine-tuned from the short
pre-training runs (whether more pre-training moves the fine-tuned result is the first thing to
know when the gain is small), and BertSum with its encoder from scratch. At the smallest and the
largest budget the BERT classifiers, pre-trained and from scratch, are also fine-tuned for five
times the steps: whether the gain at the fixed fine-tuning budget lasts when the model from
scratch gets more training.

Writes into `--out`: `pretrain/NAME` and `pretrain/NAME-short` (the pre-training runs), one run
directory per fine-tuning cell (`classification/ARM/BUDGET-sSEED`, `translation/...`),
`results.json`, `results.md` (the tables) and `curves.png` (pre-training losses, fine-tuning
losses at the smallest budget). A run directory whose `metrics.json` exists is not trained again;
one that was killed is resumed, so an interrupted experiment continues where it stopped. Several
processes may share one `--out` (e.g. `--tasks classification` and `--tasks translation` side by
side): a pre-training run is trained by one of them while the others wait for it.

    python experiments/pretraining.py --out pretraining-runs
    python experiments/pretraining.py --quick --out /tmp/pretraining-smoke
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from keras_attn.training.trainer import (  # noqa: E402
    METRICS_FILE,
    MODEL_FILE,
    TRAIN_LOG,
    TrainConfig,
    read_train_log,
    train,
)

ALL = "all"  # the budget that keeps every training example
TASKS = ("classification", "translation")


@dataclasses.dataclass(frozen=True)
class Scale:
    """The corpora, model size and training budgets of one experiment (`FULL` or `QUICK`)."""

    pretraining_corpora: str  # the BERT's and the GPT's text (comma-separated)
    denoising_corpora: str  # the mBART's text (its source and target sides)
    classification_corpus: str
    translation_corpus: str
    classification_budgets: tuple  # training sentences per class, or ALL
    translation_budgets: tuple  # training pairs, or ALL
    model: dict  # num_layers, d_model, num_heads, ff_dim of every Transformer
    vocab_size: int
    max_length: int
    batch_size: int
    pretraining_steps: int  # the full pre-training runs' step target
    pretraining_cpu_minutes: float | None  # and their CPU-time budget (the first reached ends them)
    pretraining_documents: int | None  # pre-train on the first N documents only (None: all)
    classification_steps: int
    translation_steps: int
    eval_sentences: int  # dev sentences scored per fine-tuning run (classification: and test all)
    text_cnn: dict  # text-cnn's options


FULL = Scale(
    pretraining_corpora="ding-de-en,bible-es-en,libreoffice-es-en",
    denoising_corpora="bible-es-en,libreoffice-es-en",
    classification_corpus="source-id",
    translation_corpus="libreoffice-es-en",
    classification_budgets=(50, 200, 1000, ALL),
    translation_budgets=(1000, 5000, ALL),
    model={"num_layers": 2, "d_model": 128, "num_heads": 4, "ff_dim": 256},
    vocab_size=4000,
    max_length=64,
    batch_size=32,
    pretraining_steps=20000,
    pretraining_cpu_minutes=4.0,
    pretraining_documents=None,
    classification_steps=150,
    translation_steps=250,
    eval_sentences=100,
    text_cnn={"embedding_dim": 128, "dropout": 0.1},
)
QUICK = Scale(
    pretraining_corpora="synthetic",
    denoising_corpora="synthetic",
    classification_corpus="synthetic-language-id",
    translation_corpus="synthetic",
    classification_budgets=(20,),
    translation_budgets=(100,),
    model={"num_layers": 1, "d_model": 16, "num_heads": 2, "ff_dim": 32},
    vocab_size=200,
    max_length=32,
    batch_size=16,
    pretraining_steps=8,
    pretraining_cpu_minutes=None,
    pretraining_documents=2000,
    classification_steps=4,
    translation_steps=4,
    eval_sentences=10,
    text_cnn={"embedding_dim": 16, "dropout": 0.1},
)


@dataclasses.dataclass(frozen=True)
class Pretraining:
    """One pre-training run: a family on a corpus (`Scale` field) and side."""

    name: str
    model: str
    corpora: str  # the `Scale` field that names its corpora
    side: str | None


PRETRAININGS = {
    run.name: run
    for run in (
        Pretraining("bert", "bert", "pretraining_corpora", "both"),
        Pretraining("gpt", "gpt", "pretraining_corpora", None),
        Pretraining("mbart", "bart", "denoising_corpora", "both"),
    )
}


@dataclasses.dataclass(frozen=True)
class Arm:
    """One fine-tuned model: a family, started from a pre-training run's weights (`init`) or
    from scratch with its vocabulary (`vocab`), and its own options."""

    name: str
    model: str
    init: str | None = None
    vocab: str | None = None
    options: dict = dataclasses.field(default_factory=dict)
    steps_factor: int = 1  # fine-tunes for this many times the task's steps

    @property
    def slug(self) -> str:
        name = self.name.lower().replace("×", "x")
        return name.replace(" ", "-").replace("(", "").replace(")", "")

    @property
    def pretraining(self) -> str | None:
        return self.init or self.vocab


# BertSum: the encoder at a fifth of the decoder's peak rate, warming up four times longer.
BERTSUM = {"encoder_learning_rate_factor": 0.2, "encoder_warmup_factor": 4}
ARMS = {
    "classification": (
        Arm("BERT pre-trained", "bert-classifier", init="bert"),
        Arm("BERT from scratch", "bert-classifier", vocab="bert"),
        Arm("GPT pre-trained", "gpt-classifier", init="gpt"),
        Arm("GPT from scratch", "gpt-classifier", vocab="gpt"),
        Arm("text-CNN", "text-cnn"),
    ),
    "translation": (
        Arm("mBART pre-trained", "bart-translator", init="mbart"),
        Arm("Transformer from scratch", "bart-translator", vocab="mbart"),
        Arm("BertSum", "bertsum", init="bert", options=BERTSUM),
    ),
}
# At the smallest budget only: the same fine-tuning from the short pre-training runs, and BertSum
# with its BERT encoder from scratch (BertSum's own control: the same model, vocabularies and
# optimizers).
SMALLEST_ARMS = {
    "classification": (
        Arm("BERT pre-trained (short)", "bert-classifier", init="bert-short"),
        Arm("GPT pre-trained (short)", "gpt-classifier", init="gpt-short"),
    ),
    "translation": (
        Arm("mBART pre-trained (short)", "bart-translator", init="mbart-short"),
        Arm("BertSum from scratch", "bertsum", vocab="bert", options=BERTSUM),
    ),
}
# At the smallest and the largest budget: BERT pre-trained and from scratch fine-tuned for five
# times the steps (whether the gain at a fixed, short fine-tuning budget survives longer
# fine-tuning).
LONGER_ARMS = {
    "classification": (
        Arm("BERT pre-trained (5× steps)", "bert-classifier", init="bert", steps_factor=5),
        Arm("BERT from scratch (5× steps)", "bert-classifier", vocab="bert", steps_factor=5),
    ),
    "translation": (),
}
# (pre-trained arm, its from-scratch control): the gains the tables report.
COMPARISONS = {
    "classification": (
        ("BERT pre-trained", "BERT from scratch"),
        ("GPT pre-trained", "GPT from scratch"),
        ("BERT pre-trained (5× steps)", "BERT from scratch (5× steps)"),
    ),
    "translation": (
        ("mBART pre-trained", "Transformer from scratch"),
        ("BertSum", "Transformer from scratch"),
        ("BertSum", "BertSum from scratch"),
    ),
}
METRIC = {"classification": "test_accuracy", "translation": "dev_bleu"}
# The dev metrics of each pre-training family, as metrics.json names them.
PRETRAINING_METRICS = {
    "bert": ("dev_mlm_accuracy", "dev_mlm_perplexity", "dev_nsp_accuracy"),
    "gpt": ("dev_perplexity",),
    "bart": ("dev_token_accuracy", "dev_perplexity"),
}


# ---------------------------------------------------------------------------- configs


def short_steps(args: argparse.Namespace) -> int:
    """Steps of the short pre-training runs: `--short-fraction` of `--pretraining-steps`."""
    return max(1, round(args.pretraining_steps * args.short_fraction))


def pretraining_config(run: Pretraining, scale: Scale, args: argparse.Namespace) -> TrainConfig:
    """The full-length pre-training run's config.

    The short run differs in `steps` and `max_cpu_minutes` (`--short-fraction` of each); the full
    run continues it with the rest of the CPU-time budget.
    """
    return TrainConfig(
        model=run.model,
        corpus=getattr(scale, run.corpora),
        side=run.side,
        steps=args.pretraining_steps,
        batch_size=scale.batch_size,
        learning_rate=args.pretraining_learning_rate,
        warmup_steps=args.pretraining_warmup_steps,
        schedule="inverse-sqrt",
        vocab_size=scale.vocab_size,
        max_length=scale.max_length,
        seed=args.pretraining_seed,
        eval_sentences=args.pretraining_eval_sentences,
        checkpoint_every=max(1, short_steps(args)),
        max_cpu_minutes=args.pretraining_cpu_minutes,
        train_examples=scale.pretraining_documents,
        options=scale.model,
    )


def finetuning_config(
    arm: Arm, task: str, budget: int | str, seed: int, scale: Scale, args, out: Path
) -> TrainConfig:
    """The config of one fine-tuning cell: the same steps, batch, peak rate, warm-up and cosine
    schedule for every arm of `task`."""
    steps = scale.classification_steps if task == "classification" else scale.translation_steps
    steps *= arm.steps_factor
    options = dict(arm.options)
    settings: dict = {}
    if "encoder_learning_rate_factor" in options:
        settings["encoder_learning_rate"] = args.learning_rate * options.pop(
            "encoder_learning_rate_factor"
        )
        settings["encoder_warmup_steps"] = args.warmup_steps * options.pop("encoder_warmup_factor")
    family_options = scale.text_cnn if arm.model == "text-cnn" else scale.model
    if arm.init:
        settings["init_from"] = str(out / "pretrain" / arm.init)
    if arm.vocab:
        settings["vocab_from"] = str(out / "pretrain" / arm.vocab)
    if budget != ALL:
        key = "examples_per_class" if task == "classification" else "train_examples"
        settings[key] = int(budget)
    corpus = scale.classification_corpus if task == "classification" else scale.translation_corpus
    return TrainConfig(
        model=arm.model,
        corpus=corpus,
        steps=steps,
        batch_size=scale.batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        schedule="cosine",
        vocab_size=scale.vocab_size,
        max_length=scale.max_length,
        seed=seed,
        eval_sentences=scale.eval_sentences,
        checkpoint_every=steps,
        **settings,
        **options,
        options=family_options,
    )


# ---------------------------------------------------------------------------- running


def finished(run_dir: Path) -> dict | None:
    """The metrics of a run directory whose training finished, else None."""
    path = run_dir / METRICS_FILE
    if path.is_file() and (run_dir / MODEL_FILE).is_file():
        return json.loads(path.read_text())
    return None


def train_run(run_dir: Path, config: TrainConfig, log: Callable[[str], None]) -> dict:
    """Train `config` in `run_dir` (continuing it if it was killed); its `metrics.json`."""
    done = finished(run_dir)
    if done is not None:
        return done
    label = str(run_dir)
    train(
        run_dir,
        config,
        resume=run_dir.exists(),
        progress=False,
        log=lambda line: log(f"{label}: {line}"),
    )
    return finished(run_dir)


@contextlib.contextmanager
def claimed(path: Path, wait: bool):
    """Hold the lock file `path` (an exclusive `flock`) for the `with` block; yields whether it
    was claimed. Without `wait`, a lock another process holds yields False at once."""
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def pretrain(run: Pretraining, scale: Scale, args, out: Path, log, wait: bool = True) -> bool:
    """Train the short and then the full pre-training run of `run`, unless finished; returns
    whether both are finished.

    The full run starts as a copy of the finished short run (its checkpoint, train log and
    vocabulary, not its model or metrics) and continues from there. A process that finds another
    one training the same run waits for it, or, without `wait`, returns False at once.
    """
    directory = out / "pretrain"
    directory.mkdir(parents=True, exist_ok=True)
    long_dir, short_dir = directory / run.name, directory / f"{run.name}-short"
    if finished(long_dir) is not None:
        return True
    config = pretraining_config(run, scale, args)
    minutes = config.max_cpu_minutes
    short_config = dataclasses.replace(
        config,
        steps=short_steps(args),
        max_cpu_minutes=None if minutes is None else minutes * args.short_fraction,
    )
    long_config = dataclasses.replace(
        config, max_cpu_minutes=None if minutes is None else minutes * (1 - args.short_fraction)
    )
    with claimed(directory / f"{run.name}.lock", wait) as mine:
        if not mine:
            return False
        log(f"pre-training {run.name}")
        train_run(short_dir, short_config, log)
        if finished(long_dir) is None and not long_dir.exists():
            copying = directory / f"{run.name}.copy"
            shutil.rmtree(copying, ignore_errors=True)
            shutil.copytree(
                short_dir, copying, ignore=shutil.ignore_patterns(METRICS_FILE, MODEL_FILE)
            )
            copying.rename(long_dir)
        train_run(long_dir, long_config, log)
    return True


def task_budgets(task: str, scale: Scale) -> tuple:
    """The training budgets of `task`, smallest first."""
    return scale.classification_budgets if task == "classification" else scale.translation_budgets


def cells(
    task: str, scale: Scale, seeds: Sequence[int], arms: Sequence[str] | None = None
) -> list[tuple[Arm, int | str, int]]:
    """Every `(arm, budget, seed)` of `task`: all arms at all budgets, the smallest-budget arms
    at the smallest budget, the longer fine-tuning arms at the smallest and the largest; only
    the arms whose slug is in `arms`, if given."""
    budgets = task_budgets(task, scale)
    jobs = [(arm, budget, seed) for budget in budgets for arm in ARMS[task] for seed in seeds]
    jobs += [(arm, budgets[0], seed) for arm in SMALLEST_ARMS[task] for seed in seeds]
    ends = dict.fromkeys((budgets[0], budgets[-1]))
    jobs += [(arm, budget, seed) for budget in ends for arm in LONGER_ARMS[task] for seed in seeds]
    return [job for job in jobs if arms is None or job[0].slug in arms]


def cell_directory(out: Path, task: str, arm: Arm, budget: int | str, seed: int) -> Path:
    return out / task / arm.slug / f"{budget}-s{seed}"


def run_cells(tasks: Sequence[str], scale: Scale, args, out: Path, log) -> list[dict]:
    """Fine-tune every cell of `tasks`' chosen arms, each pre-training run trained when a cell
    first needs it; one result per cell, in the order of `cells`.

    Processes sharing `out` share the work: a cell (or a pre-training run) that another process
    holds is put off and taken up again once it is free, or finished; a process waits only when
    nothing else is left to do.
    """
    jobs = [(task, *cell) for task in tasks for cell in cells(task, scale, args.seeds, args.arms)]
    metrics: dict[int, dict] = {}
    pending = list(range(len(jobs)))
    while pending:
        deferred = []
        for index in pending:
            task, arm, budget, seed = jobs[index]
            name = arm.pretraining.removesuffix("-short") if arm.pretraining else None
            if name is not None and not pretrain(PRETRAININGS[name], scale, args, out, log, False):
                deferred.append(index)
                continue
            run_dir = cell_directory(out, task, arm, budget, seed)
            run_dir.parent.mkdir(parents=True, exist_ok=True)
            with claimed(run_dir.with_name(run_dir.name + ".lock"), wait=False) as mine:
                if not mine:
                    deferred.append(index)
                    continue
                config = finetuning_config(arm, task, budget, seed, scale, args, out)
                started = time.perf_counter()
                metrics[index] = train_run(run_dir, config, log)
            log(
                f"{task} / {arm.name} / {budget} / seed {seed}: {METRIC[task]} "
                f"{metrics[index][METRIC[task]]} ({time.perf_counter() - started:.0f} s)"
            )
        if deferred == pending:
            time.sleep(5.0)  # all of it is another process' work in progress
        pending = deferred
    return [
        {
            "task": task,
            "arm": arm.name,
            "budget": str(budget),
            "seed": seed,
            "value": metrics[index][METRIC[task]],
            "metrics": metrics[index],
            "run": str(cell_directory(out, task, arm, budget, seed)),
        }
        for index, (task, arm, budget, seed) in enumerate(jobs)
    ]


# ---------------------------------------------------------------------------- tables


def summarize(values: Sequence[float]) -> dict:
    """Mean, minimum, maximum and spread (maximum - minimum) of one cell's seeds."""
    array = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(array.mean()),
        "min": float(array.min()),
        "max": float(array.max()),
        "spread": float(array.max() - array.min()),
        "seeds": len(array),
    }


def cell_values(results: Sequence[dict]) -> dict[tuple[str, str], list[float]]:
    """`{(arm, budget): [value of each seed]}`."""
    grouped: dict[tuple[str, str], list[float]] = {}
    for result in results:
        grouped.setdefault((result["arm"], result["budget"]), []).append(result["value"])
    return grouped


def gain(treated: Sequence[float], control: Sequence[float]) -> dict:
    """The gain of the treated arm's mean over the control's, against the seed spread (the larger
    of the two arms' max - min): it `exceeds` the spread when gain > spread."""
    a, b = summarize(treated), summarize(control)
    spread = max(a["spread"], b["spread"])
    difference = a["mean"] - b["mean"]
    return {"gain": difference, "spread": spread, "exceeds": difference > spread}


def _format(value: float, scale: float, digits: int) -> str:
    return f"{value * scale:.{digits}f}"


def format_table(task: str, results: Sequence[dict], budgets: Sequence[str]) -> str:
    """The markdown table of one task: an arm per row, a budget per column, each cell the mean
    over seeds with the (minimum-maximum) range; then one gain row per comparison."""
    grouped = cell_values(results)
    scale, digits = (100.0, 1) if task == "classification" else (1.0, 2)
    arms = list(dict.fromkeys(result["arm"] for result in results))
    unit = "test accuracy %" if task == "classification" else "dev BLEU"
    head = "per class" if task == "classification" else "pairs"
    lines = [
        f"| {unit} ({head}) | " + " | ".join(budgets) + " |",
        "|---|" + "---:|" * len(budgets),
    ]
    for arm in arms:
        row = []
        for budget in budgets:
            values = grouped.get((arm, budget))
            if not values:
                row.append("")
                continue
            s = summarize(values)
            row.append(
                f"{_format(s['mean'], scale, digits)} ({_format(s['min'], scale, digits)}–"
                f"{_format(s['max'], scale, digits)})"
            )
        lines.append(f"| {arm} | " + " | ".join(row) + " |")
    for treated, control in COMPARISONS[task]:
        row = []
        for budget in budgets:
            a, b = grouped.get((treated, budget)), grouped.get((control, budget))
            if not a or not b:
                row.append("")
                continue
            g = gain(a, b)
            verdict = ">" if g["exceeds"] else "≤"
            row.append(
                f"{g['gain'] * scale:+.{digits}f} {verdict} {_format(g['spread'], scale, digits)}"
            )
        lines.append(f"| gain {treated} − {control} (vs spread) | " + " | ".join(row) + " |")
    return "\n".join(lines)


def pretraining_cost(out: Path, scale: Scale) -> list[dict]:
    """Steps, training wall and CPU seconds and dev metrics of every finished pre-training run.

    A full run's seconds are the short run's plus its own (it continued the short run's copy).
    """
    rows = []
    for run in PRETRAININGS.values():
        short = finished(out / "pretrain" / f"{run.name}-short")
        long = finished(out / "pretrain" / run.name)
        for label, metrics, before in (("-short", short, None), ("", long, short)):
            if metrics is None:
                continue
            wall = metrics["train_seconds_this_session"]
            cpu = metrics["train_cpu_seconds_this_session"]
            if before is not None:
                wall += before["train_seconds_this_session"]
                cpu += before["train_cpu_seconds_this_session"]
            rows.append(
                {
                    "run": run.name + label,
                    "model": run.model,
                    "corpora": getattr(scale, run.corpora),
                    "side": run.side or "target",
                    "steps": metrics["steps"],
                    "train_seconds": round(wall, 1),
                    "train_cpu_seconds": round(cpu, 1),
                    **{k: metrics.get(k) for k in PRETRAINING_METRICS[run.model]},
                }
            )
    return rows


def format_cost_table(rows: Sequence[dict]) -> str:
    lines = [
        "| pre-training run | model | corpora (side) | steps | train wall s | train CPU s | "
        "dev metrics |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for row in rows:
        metrics = ", ".join(
            f"{k.removeprefix('dev_')} {row[k]}"
            for k in PRETRAINING_METRICS[row["model"]]
            if row[k] is not None  # no NSP accuracy when the dev text has no sentence pairs
        )
        lines.append(
            f"| {row['run']} | {row['model']} | {row['corpora']} ({row['side']}) | {row['steps']} "
            f"| {row['train_seconds']} | {row['train_cpu_seconds']} | {metrics} |"
        )
    return "\n".join(lines)


def loss_at(run_dir: Path, steps: Sequence[int], window: int) -> list[float | None]:
    """The mean training loss of the `window` steps ending at each of `steps` (None past the
    run's end): a pre-training or fine-tuning curve in a few numbers."""
    rows = read_train_log(run_dir / TRAIN_LOG)
    losses = {step: loss for step, loss, _ in rows}
    points = []
    for step in steps:
        chosen = [losses[s] for s in range(max(1, step - window + 1), step + 1) if s in losses]
        points.append(float(np.mean(chosen)) if chosen and step in losses else None)
    return points


def format_curve_table(runs: dict[str, Path], window: int, points: int = 6) -> str:
    """A markdown table of training-loss curves: one row per run, its loss (mean of `window`
    steps) at `points` steps spread evenly over that run's own length, as `loss @ step`."""
    header = " | ".join(f"{i + 1}/{points}" for i in range(points))
    lines = [
        f"| training loss (mean of {window} steps) at a share of the run | {header} |",
        "|---|" + "---:|" * points,
    ]
    for name, run_dir in runs.items():
        rows = read_train_log(run_dir / TRAIN_LOG)
        if not rows:
            continue
        steps = curve_steps(rows[-1][0], points)
        values = loss_at(run_dir, steps, window)
        cells_ = [f"{v:.3f} @ {step}" for step, v in zip(steps, values, strict=True)]
        lines.append(f"| {name} | " + " | ".join(cells_) + " |")
    return "\n".join(lines)


def curve_steps(total: int, points: int = 6) -> list[int]:
    """`points` steps spread evenly over a run of `total` steps, ending at `total`."""
    return sorted({max(1, round(total * (i + 1) / points)) for i in range(points)})


def plot_curves(
    pretraining: dict[str, Path], finetuning: dict[str, dict[str, Path]], path: Path
) -> None:
    """`curves.png`: pre-training losses, then each task's fine-tuning losses at the smallest
    budget, one panel each, smoothed over 25 steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(pretraining, "pre-training loss")]
    panels += [
        (runs, f"fine-tuning loss, {task}, smallest budget") for task, runs in finetuning.items()
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for axis, (runs, title) in zip(axes[0], panels, strict=True):
        for name, run_dir in runs.items():
            rows = read_train_log(run_dir / TRAIN_LOG)
            if not rows:
                continue
            steps = np.asarray([r[0] for r in rows])
            loss = np.asarray([r[1] for r in rows])
            width = min(25, len(loss))
            smooth = np.convolve(loss, np.ones(width) / width, mode="valid")
            axis.plot(steps[width - 1 :], smooth, label=name)
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.set_ylabel("loss")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_atomically(path: Path, text: str) -> None:
    """Write `path` under a temporary name, then move it into place (processes sharing `--out`
    both write the report)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def write_report(out: Path, scale: Scale, args, results: Sequence[dict]) -> str:
    """Write `results.json`, `results.md` and `curves.png`; returns the markdown."""
    tasks = list(dict.fromkeys(result["task"] for result in results))
    sections = ["### Pre-training cost\n", format_cost_table(pretraining_cost(out, scale))]
    finetuning_curves: dict[str, dict[str, Path]] = {}
    for task in tasks:
        budgets = task_budgets(task, scale)
        chosen = [r for r in results if r["task"] == task]
        title = (
            f"Classification: {scale.classification_corpus}, test accuracy"
            if task == "classification"
            else f"Translation: {scale.translation_corpus}, dev BLEU (greedy)"
        )
        sections += [
            f"\n### {title}\n",
            format_table(task, chosen, [str(b) for b in budgets]),
        ]
        smallest = str(budgets[0])
        for arm in (*ARMS[task], *SMALLEST_ARMS[task]):
            run_dir = cell_directory(out, task, arm, smallest, args.seeds[0])
            if (run_dir / TRAIN_LOG).is_file():
                curves = finetuning_curves.setdefault(task, {})
                curves[f"{arm.name} ({smallest}, seed {args.seeds[0]})"] = run_dir
    pretraining_runs = {
        name: out / "pretrain" / name
        for run in PRETRAININGS.values()
        for name in (run.name, f"{run.name}-short")
        if finished(out / "pretrain" / name) is not None
    }
    long_runs = {k: v for k, v in pretraining_runs.items() if not k.endswith("-short")}
    sections += [
        "\n### Pre-training curves\n",
        format_curve_table(long_runs, window=max(1, min(100, args.pretraining_steps // 10))),
    ]
    for task, curves in finetuning_curves.items():
        steps = scale.classification_steps if task == "classification" else scale.translation_steps
        sections += [
            f"\n### Fine-tuning curves, {task}, smallest budget (seed {args.seeds[0]})\n",
            format_curve_table(curves, window=max(1, min(25, steps // 10))),
        ]
    markdown = "\n".join(sections) + "\n"
    write_atomically(out / "results.md", markdown)
    write_atomically(
        out / "results.json",
        json.dumps(
            {
                "argv": sys.argv[1:],
                "scale": dataclasses.asdict(scale),
                "pretraining": pretraining_cost(out, scale),
                "results": results,
            },
            indent=1,
            ensure_ascii=False,
        )
        + "\n",
    )
    figure = out / f"curves.{os.getpid()}.tmp.png"
    plot_curves(long_runs, finetuning_curves, figure)
    os.replace(figure, out / "curves.png")
    return markdown


# ---------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny models on the synthetic corpora, a few steps (a smoke test of the pipeline)",
    )
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    slugs = [
        arm.slug
        for task in TASKS
        for arm in (*ARMS[task], *SMALLEST_ARMS[task], *LONGER_ARMS[task])
    ]
    parser.add_argument(
        "--arms", nargs="+", choices=slugs, help="fine-tune these arms only (default: all)"
    )
    parser.add_argument("--pretraining-steps", type=int, help="steps of each full pre-training run")
    parser.add_argument(
        "--pretraining-cpu-minutes",
        type=float,
        help="CPU-time budget of each full pre-training run (its short run gets its share)",
    )
    parser.add_argument(
        "--short-fraction",
        type=float,
        default=0.25,
        help="the short pre-training runs stop at this share of the steps",
    )
    parser.add_argument("--pretraining-learning-rate", type=float, default=1e-3)
    parser.add_argument("--pretraining-warmup-steps", type=int, default=100)
    parser.add_argument("--pretraining-eval-sentences", type=int, default=500)
    parser.add_argument("--pretraining-seed", type=int, default=0)
    parser.add_argument(
        "--learning-rate", type=float, default=5e-4, help="fine-tuning peak rate, every arm"
    )
    parser.add_argument("--warmup-steps", type=int, default=30, help="fine-tuning warm-up")
    parser.add_argument(
        "--threads", type=int, default=0, help="TensorFlow intra-op threads (0: all cores)"
    )
    args = parser.parse_args(argv)
    scale = QUICK if args.quick else FULL
    if args.pretraining_steps is None:
        args.pretraining_steps = scale.pretraining_steps
    if args.pretraining_cpu_minutes is None:
        args.pretraining_cpu_minutes = scale.pretraining_cpu_minutes
    if args.quick:
        args.pretraining_eval_sentences = min(args.pretraining_eval_sentences, 20)
        args.warmup_steps = min(args.warmup_steps, 2)
        args.pretraining_warmup_steps = min(args.pretraining_warmup_steps, 2)
    if args.pretraining_steps < 2:
        parser.error(f"--pretraining-steps must be at least 2, got {args.pretraining_steps}")
    if not 0 < args.short_fraction < 1:
        parser.error(f"--short-fraction must be in (0, 1), got {args.short_fraction}")
    if len(set(args.seeds)) < 2:
        parser.error(f"--seeds needs at least two different seeds, got {args.seeds}")
    args.scale = scale
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    log(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, keras "
        f"{keras.__version__}; tasks {', '.join(args.tasks)}; seeds {args.seeds}"
    )
    results = run_cells(args.tasks, args.scale, args, out, log)
    markdown = write_report(out, args.scale, args, results)
    print("\n" + markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
