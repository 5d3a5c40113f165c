"""Visual question answering on generated scenes with parallel co-attention (Lu et al., 2016).

Trains `vqa-coattention` (`keras_attn.training.trainer.train`, as `keras-attn train --model
vqa-coattention --corpus scenes-N` does) once per seed on the questions of the generated scenes
(`keras_attn.vision.question_splits`: "what colour is the <shape>?", "what shape is
<colour>?", "is there a <colour> shape?", "how many shapes are there?"), then answers the
held-out test questions and reports, by question type:

- accuracy, against the majority-answer baseline (the training split's most common answer of
  the type);
- for the colour questions, the mean attention mass the region map `a^v` puts on the cells the
  asked object covers, against the mass a uniform map puts there.

Writes into `--out`: `seed-S/run` (the run directory; a finished run is not trained again),
`results.json` and `results.md` (the table for docs/results.md).

    python experiments/vqa_coattention.py --out OUT
    python experiments/vqa_coattention.py --quick --out /tmp/vqa-smoke
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


from keras_attn.formats import RunDirectory  # noqa: E402
from keras_attn.training.tasks.question_answering import (  # noqa: E402
    majority_answers,
    predict_answers,
    score_answers,
)
from keras_attn.training.trainer import METRICS_FILE, TrainConfig, train  # noqa: E402
from keras_attn.vision import QUESTION_TYPES, question_splits  # noqa: E402

DEV_SCENES = 200  # the dev split `keras-attn train` draws (before the test split)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--seeds", default="0,1", help="comma-separated seeds (one run each)")
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--train-scenes", type=int, default=4000)
    parser.add_argument("--test-scenes", type=int, default=500)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="a few steps on a few scenes")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.train_scenes, args.test_scenes, args.seeds = 20, 40, 20, "0"
    return args


def run_seed(args: argparse.Namespace, seed: int) -> dict:
    """Train (unless finished) and score the test questions of one seed."""
    path = args.out / f"seed-{seed}" / "run"
    corpus = f"scenes-{args.image_size}"
    if not (path / METRICS_FILE).exists():
        config = TrainConfig(
            model="vqa-coattention",
            corpus=corpus,
            steps=args.steps,
            batch_size=args.batch_size,
            train_examples=args.train_scenes,
            eval_sentences=800,
            seed=seed,
            checkpoint_every=max(args.steps // 4, 1),
        )
        train(path, config, log=lambda line: print(f"seed {seed}: {line}", flush=True))
    sizes = {"train": args.train_scenes, "dev": DEV_SCENES, "test": args.test_scenes}
    splits = question_splits(seed=seed, sizes=sizes, image_size=args.image_size)
    run = RunDirectory(path)
    test = splits["test"]
    predicted, attention = predict_answers(run.load_model(), run.tokenizer(), test)
    scores = score_answers(test, predicted, attention, majority_answers(splits["train"]))
    scores["train_seconds"] = json.loads((path / METRICS_FILE).read_text())[
        "train_cpu_seconds_this_session"
    ]
    return scores


def table(results: dict[int, dict]) -> str:
    """The markdown table: one row per question type, for each seed its test questions, the
    accuracy and the majority answer's accuracy."""
    seeds = sorted(results)
    head = " | ".join(f"seed {seed}: accuracy (majority answer)" for seed in seeds)
    lines = [f"| question type | test questions | {head} |", "|---|---:|" + "---:|" * len(seeds)]
    for kind in QUESTION_TYPES:
        count = " / ".join(str(results[seed][f"questions_{kind}"]) for seed in seeds)
        cells = " | ".join(
            f"{results[seed][f'accuracy_{kind}']:.1%} ({results[seed][f'majority_{kind}']:.1%})"
            for seed in seeds
        )
        lines.append(f"| {kind} | {count} | {cells} |")
    count = " / ".join(
        str(sum(results[seed][f"questions_{kind}"] for kind in QUESTION_TYPES)) for seed in seeds
    )
    cells = " | ".join(f"{results[seed]['accuracy']:.1%}" for seed in seeds)
    lines.append(f"| all | {count} | {cells} |")
    attention = " | ".join(
        f"{results[seed]['attention_on_object']:.3f} (uniform "
        f"{results[seed]['attention_uniform']:.3f})"
        for seed in seeds
    )
    lines.append(f"| colour: attention mass on the asked object | | {attention} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.process_time()
    results = {int(seed): run_seed(args, int(seed)) for seed in args.seeds.split(",")}
    command = "python experiments/vqa_coattention.py " + " ".join(sys.argv[1:])
    summary = {
        "command": command,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "cpu_seconds": round(time.process_time() - started, 1),
        "results": {str(seed): scores for seed, scores in results.items()},
    }
    (args.out / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
    markdown = table(results)
    (args.out / "results.md").write_text(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
