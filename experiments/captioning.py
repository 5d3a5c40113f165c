"""Show, Attend and Tell on generated scenes: soft against hard attention at one CPU budget.

Trains two image captioners (`keras_attn.training.trainer.train`, the `show-attend-tell`
family of `keras-attn train`) on the generated `scenes` corpus (`keras_attn.vision`: 64-pixel
scenes of one to four coloured shapes, captions naming every object, its size and colour, and
the relation of each pair): one with soft (deterministic) attention, one with hard (stochastic)
attention over the 8x8 regions of the convolutional feature grid (Xu et al., 2015,
arXiv:1502.03044). Both get the same steps, batch, learning-rate schedule, doubly stochastic
regulariser weight and CPU-time budget (`max_cpu_minutes`, this process' CPU time, fair on a
machine shared with other jobs; the first of steps and budget reached ends the run).

Then captions (greedy, through the exported path: `keras_attn.export.captioner.Captioner`)
the held-out test scenes and the unseen-combination scenes (every scene shows a (colour, shape)
pair no training scene has) and reports:

- caption BLEU (sacrebleu) and exact match, overall and by the number of objects;
- the attention check: whenever the model emits an object's noun (a shape word), the share of
  that word's attention mass inside the region of the object its phrase names (the grid cells
  the object's mask covers) against the share a uniform map puts there (region cells / L), as
  means over those nouns and their ratio (`keras_attn.vision.object_attention`). Attention that
  looks where the word points gives a ratio well above 1.

Writes into `--out`: `ARM/run` (the run directory), `ARM/evaluation.json` (the scores) and
`ARM/captions_SPLIT.tsv` (reference, caption per scene), `results.json` and `results.md`. A
finished run is not trained again and a killed one is resumed; an evaluation is not repeated, so
an interrupted experiment continues where it stopped. `--workers 2` trains both arms at once,
each in its own process with half the cores.

    python experiments/captioning.py --out OUT
    python experiments/captioning.py --quick --out /tmp/captioning-smoke
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from keras_attn.training.trainer import METRICS_FILE, MODEL_FILE, TrainConfig, train  # noqa: E402
from keras_attn.vision import (  # noqa: E402
    object_attention,
    scene_splits,
    summarize_object_attention,
)
from keras_attn.vision.scenes import DEFAULT_SPLIT_SIZES  # noqa: E402

ARMS = ("soft", "hard")
SPLITS = ("test", "unseen")
RUN = "run"
EVALUATION = "evaluation.json"


@dataclasses.dataclass(frozen=True)
class Scale:
    """The corpus, model and training budget of one experiment (`FULL` or `QUICK`)."""

    corpus: str  # scenes (64-pixel images) or scenes-N
    train_examples: int
    steps: int
    cpu_minutes: float | None  # per model; the first of steps and budget reached ends a run
    batch_size: int
    learning_rate: float
    warmup_steps: int
    embedding_dim: int
    units: int
    penalty: float  # lambda of the doubly stochastic regulariser
    eval_scenes: int  # held-out test scenes and unseen-combination scenes scored, each


FULL = Scale(
    corpus="scenes",
    train_examples=2000,
    steps=1800,
    cpu_minutes=8.0,
    batch_size=32,
    learning_rate=3e-3,
    warmup_steps=100,
    embedding_dim=128,
    units=256,
    penalty=0.05,
    eval_scenes=200,
)
QUICK = Scale(
    corpus="scenes-32",
    train_examples=32,
    steps=4,
    cpu_minutes=None,
    batch_size=8,
    learning_rate=3e-3,
    warmup_steps=2,
    embedding_dim=8,
    units=16,
    penalty=0.05,
    eval_scenes=8,
)


# ---------------------------------------------------------------------------- training


def train_config(arm: str, scale: Scale, seed: int) -> TrainConfig:
    """The run of one arm: the same budget, schedule and model size for both attentions."""
    return TrainConfig(
        model="show-attend-tell",
        corpus=scale.corpus,
        options={
            "attention": arm,
            "embedding_dim": scale.embedding_dim,
            "units": scale.units,
            "penalty": scale.penalty,
        },
        train_examples=scale.train_examples,
        steps=scale.steps,
        batch_size=scale.batch_size,
        learning_rate=scale.learning_rate,
        warmup_steps=scale.warmup_steps,
        schedule="cosine",
        seed=seed,
        eval_sentences=min(scale.eval_scenes, 100),
        checkpoint_every=max(1, scale.steps // 5),
        max_cpu_minutes=scale.cpu_minutes,
    )


def finished(run_dir: Path) -> dict | None:
    """The metrics of a run directory whose training finished, else None."""
    path = run_dir / METRICS_FILE
    if path.is_file() and (run_dir / MODEL_FILE).is_file():
        return json.loads(path.read_text())
    return None


@contextlib.contextmanager
def claimed(path: Path):
    """Hold the lock file `path` (an exclusive `flock`) for the `with` block: processes sharing
    `--out` train and evaluate an arm one at a time."""
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def train_run(run_dir: Path, config: TrainConfig, log: Callable[[str], None]) -> dict:
    """Train `config` in `run_dir` (continuing it if it was killed); its `metrics.json`."""
    done = finished(run_dir)
    if done is not None:
        return done
    train(
        run_dir,
        config,
        resume=run_dir.exists(),
        progress=False,
        log=lambda line: log(f"{run_dir}: {line}"),
    )
    return finished(run_dir)


# ---------------------------------------------------------------------------- evaluation


def evaluation_scenes(config: TrainConfig, eval_scenes: int) -> dict:
    """The held-out `test` and `unseen` scenes of the run's corpus (same seed and training
    split, so no test image is a training image)."""
    from keras_attn.training.tasks.captioning import scene_image_size

    train = config.train_examples or DEFAULT_SPLIT_SIZES["train"]
    sizes = {"train": train, "dev": DEFAULT_SPLIT_SIZES["dev"], "test": eval_scenes}
    sizes["unseen"] = eval_scenes
    splits = scene_splits(config.seed, sizes, image_size=scene_image_size(config.corpus))
    return {split: splits[split] for split in SPLITS}


def caption_scenes(captioner, scenes, batch_size: int = 100) -> list[tuple[str, list, np.ndarray]]:
    """`(caption, words, attention (T_out, H', W'))` of each scene, greedy through `captioner`."""
    import tensorflow as tf

    results = []
    for begin in range(0, len(scenes), batch_size):
        images = np.stack([scene.image for scene in scenes[begin : begin + batch_size]])
        outputs = captioner.caption_pixels(tf.constant(images))
        for caption, attention in zip(
            outputs["caption"].numpy(), outputs["attention"].numpy(), strict=True
        ):
            text = caption.decode("utf-8")
            results.append((text, text.split(), attention))
    return results


def score_split(scenes, captions) -> dict:
    """BLEU, exact match (overall and by object count) and the attention check of one split."""
    from keras_attn.training.metrics import corpus_bleu, exact_match

    hypotheses = [caption for caption, _, _ in captions]
    references = [scene.caption for scene in scenes]
    by_objects = {}
    for count in sorted({len(scene.objects) for scene in scenes}):
        chosen = [i for i, scene in enumerate(scenes) if len(scene.objects) == count]
        by_objects[str(count)] = {
            "scenes": len(chosen),
            "exact_match": exact_match(
                [hypotheses[i] for i in chosen], [references[i] for i in chosen]
            ),
        }
    records = [
        record
        for scene, (_, words, attention) in zip(scenes, captions, strict=True)
        for record in object_attention(words, attention, scene.objects)
    ]
    return {
        "scenes": len(scenes),
        "bleu": corpus_bleu(hypotheses, references),
        "exact_match": exact_match(hypotheses, references),
        "by_objects": by_objects,
        "attention": summarize_object_attention(records),
    }


def evaluate_arm(directory: Path, eval_scenes: int, log: Callable[[str], None]) -> dict:
    """Score a finished arm on the test and unseen scenes; written to `ARM/evaluation.json`
    (and the captions to `ARM/captions_SPLIT.tsv`), and read back from there when present."""
    path = directory / EVALUATION
    if path.is_file():
        return json.loads(path.read_text())
    from keras_attn.export.captioner import MAX_CAPTION_TOKENS, Captioner
    from keras_attn.formats import RunDirectory
    from keras_attn.models.families import get_family

    run = RunDirectory(directory / RUN)
    config = TrainConfig.from_fields(run.read_config_fields())
    model = run.load_model()
    steps = get_family(config.model).decoding_steps(model, MAX_CAPTION_TOKENS)
    captioner = Captioner(model, steps, run.tokenizer(), MAX_CAPTION_TOKENS)
    evaluation = {"metrics": finished(directory / RUN), "grid": list(captioner.grid_shape)}
    for split, scenes in evaluation_scenes(config, eval_scenes).items():
        started = time.perf_counter()
        captions = caption_scenes(captioner, scenes)
        evaluation[split] = score_split(scenes, captions)
        rows = "".join(
            f"{scene.caption}\t{caption}\n"
            for scene, (caption, _, _) in zip(scenes, captions, strict=True)
        )
        (directory / f"captions_{split}.tsv").write_text("reference\tcaption\n" + rows)
        log(
            f"{directory.name} / {split}: BLEU {evaluation[split]['bleu']:.2f}, exact match "
            f"{evaluation[split]['exact_match']:.1%} ({time.perf_counter() - started:.0f} s)"
        )
    write_atomically(path, json.dumps(evaluation, indent=1) + "\n")
    return evaluation


def run_arm(arm: str, scale: Scale, seed: int, out: Path, log) -> dict:
    """Train (or resume) and evaluate one arm, holding its lock."""
    directory = out / arm
    directory.mkdir(parents=True, exist_ok=True)
    with claimed(out / f"{arm}.lock"):
        started = time.perf_counter()
        metrics = train_run(directory / RUN, train_config(arm, scale, seed), log)
        log(
            f"{arm}: trained {metrics['steps']} steps, dev BLEU {metrics['dev_bleu']} "
            f"({time.perf_counter() - started:.0f} s)"
        )
        return evaluate_arm(directory, scale.eval_scenes, log)


# ---------------------------------------------------------------------------- tables


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def _percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}"


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def format_tables(evaluations: dict[str, dict]) -> str:
    """The markdown tables of the evaluated arms: training, captions, the attention check."""
    arms = list(evaluations)
    lines = [
        "| attention | steps | train CPU s | train wall s | final train loss | dev BLEU |",
        "|---|---|---|---|---|---|",
    ]
    for arm in arms:
        metrics = evaluations[arm]["metrics"]
        lines.append(
            f"| {arm} | {metrics['steps']} | {metrics['train_cpu_seconds_this_session']:.0f} | "
            f"{metrics['train_seconds_this_session']:.0f} | {metrics['final_loss']:.3f} | "
            f"{metrics['dev_bleu']:.2f} |"
        )
    lines += [
        "",
        "| attention | test BLEU | test exact % | unseen BLEU | unseen exact % |",
        "|---|---|---|---|---|",
    ]
    for arm in arms:
        test, unseen = evaluations[arm]["test"], evaluations[arm]["unseen"]
        lines.append(
            f"| {arm} | {test['bleu']:.2f} | {_percent(test['exact_match'])} | "
            f"{unseen['bleu']:.2f} | {_percent(unseen['exact_match'])} |"
        )
    counts = sorted(
        {
            count
            for arm in arms
            for split in SPLITS
            for count in evaluations[arm][split]["by_objects"]
        }
    )
    lines += [
        "",
        "| exact match % by objects | " + " | ".join(counts) + " |",
        "|---|" + "---|" * len(counts),
    ]
    for arm in arms:
        for split in SPLITS:
            by_objects = evaluations[arm][split]["by_objects"]
            cells = [
                f"{_percent(by_objects[c]['exact_match'])} ({by_objects[c]['scenes']})"
                if c in by_objects
                else ""
                for c in counts
            ]
            lines.append(f"| {arm}, {split} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| attention, split | nouns | matched to an object | mass inside the object % | "
        "uniform share % | ratio | named exactly | mass inside % | uniform % | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in arms:
        for split in SPLITS:
            check = evaluations[arm][split]["attention"]
            lines.append(
                f"| {arm}, {split} | {check['nouns']} | {check['grounded']} | "
                f"{_percent(check['share'])} | {_percent(check['uniform'])} | "
                f"{_ratio(check['ratio'])} | {check['exact']} | {_percent(check['exact_share'])} | "
                f"{_percent(check['exact_uniform'])} | {_ratio(check['exact_ratio'])} |"
            )
    lines += [
        "",
        "| mass inside the object %, at each word of its phrase | a | size | colour | noun | "
        "uniform |",
        "|---|---|---|---|---|---|",
    ]
    for arm in arms:
        for split in SPLITS:
            check = evaluations[arm][split]["attention"]
            cells = [_percent(share) for share in check["phrase_shares"]]
            lines.append(
                f"| {arm}, {split} | " + " | ".join(cells) + f" | {_percent(check['uniform'])} |"
            )
    return "\n".join(lines) + "\n"


def write_report(out: Path, scale: Scale, args, evaluations: dict[str, dict]) -> str:
    """`results.md` (the tables) and `results.json` (scale, seed and every score)."""
    markdown = format_tables(evaluations)
    write_atomically(out / "results.md", markdown)
    report = {
        "argv": sys.argv[1:],
        "scale": dataclasses.asdict(scale),
        "seed": args.seed,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "arms": evaluations,
    }
    write_atomically(out / "results.json", json.dumps(report, indent=1) + "\n")
    return markdown


# ---------------------------------------------------------------------------- main


def worker_argv(argv: Sequence[str], arm: str, threads: int) -> list[str]:
    """`argv` for a worker process of one arm: `--arms arm --workers 1 --threads N`, the other
    flags kept."""
    kept, skip = [], False
    for value in argv:
        if skip and not value.startswith("--"):
            continue
        skip = value in ("--arms", "--workers", "--threads")
        if skip or value.split("=")[0] in ("--arms", "--workers", "--threads"):
            continue
        kept.append(value)
    return [*kept, "--arms", arm, "--workers", "1", "--threads", str(threads)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument(
        "--quick", action="store_true", help="a tiny model on 32-pixel scenes, a few steps"
    )
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--seed", type=int, default=0, help="corpus and initialisation seed")
    parser.add_argument("--steps", type=int, help="training steps of each arm")
    parser.add_argument(
        "--cpu-minutes", type=float, help="CPU-time budget of each arm's training loop"
    )
    parser.add_argument("--penalty", type=float, help="doubly stochastic regulariser weight")
    parser.add_argument("--eval-scenes", type=int, help="test and unseen scenes scored, each")
    parser.add_argument("--workers", type=int, default=1, help="arms trained at once")
    parser.add_argument(
        "--threads", type=int, default=0, help="TensorFlow intra-op threads (0: all cores)"
    )
    args = parser.parse_args(argv)
    scale = QUICK if args.quick else FULL
    changes = {
        "steps": args.steps,
        "cpu_minutes": args.cpu_minutes,
        "penalty": args.penalty,
        "eval_scenes": args.eval_scenes,
    }
    args.scale = dataclasses.replace(scale, **{k: v for k, v in changes.items() if v is not None})
    if args.scale.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.scale.steps}")
    if args.scale.cpu_minutes is not None and args.scale.cpu_minutes <= 0:
        parser.error(f"--cpu-minutes must be positive, got {args.scale.cpu_minutes}")
    if args.scale.penalty < 0:
        parser.error(f"--penalty must be >= 0, got {args.scale.penalty}")
    if args.scale.eval_scenes < 1:
        parser.error(f"--eval-scenes must be at least 1, got {args.scale.eval_scenes}")
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    if args.workers > 1 and len(args.arms) > 1:
        threads = max(1, (os.cpu_count() or 1) // args.workers)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        pending, running, status = list(args.arms), [], 0
        while pending or running:
            while pending and len(running) < args.workers:
                command = [sys.executable, __file__, *worker_argv(argv, pending.pop(0), threads)]
                running.append(subprocess.Popen(command, env=env))
            time.sleep(1.0)
            for process in [p for p in running if p.poll() is not None]:
                running.remove(process)
                status = status or process.returncode
        if status:
            log(f"a worker failed (exit status {status})")
            return status
    if args.threads:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    log(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; arms "
        f"{', '.join(args.arms)}; seed {args.seed}; {args.scale}"
    )
    for arm in args.arms:
        run_arm(arm, args.scale, args.seed, out, log)
    evaluations = {
        arm: json.loads((out / arm / EVALUATION).read_text())
        for arm in ARMS
        if (out / arm / EVALUATION).is_file()
    }
    markdown = write_report(out, args.scale, args, evaluations)
    print("\n" + markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
