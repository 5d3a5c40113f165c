"""Show, Attend and Tell: where a captioner looks while it names each word (Xu et al., Fig. 2).

    python examples/show_attend_tell.py [--steps 600] [--out show_attend_tell]
    python examples/show_attend_tell.py --soft-run RUN --hard-run RUN [--figure PATH]

Trains two captioners on the generated `scenes` corpus (`keras_attn.vision`: 64-pixel scenes
of one to four coloured shapes, captions such as "a small red circle to the left of a large
blue square"), one with soft and one with hard attention over the 8x8 regions of the
convolutional feature grid (`keras-attn train --model show-attend-tell --attention soft|hard`),
or loads two finished run directories of that command (`--soft-run`, `--hard-run`). Then
captions held-out test scenes through the exported path (`keras_attn.export.captioner.
Captioner`, greedy) and draws the paper's Fig. 2: per image, the image, then for every word of
the caption the image lit by that word's attention map (upsampled from the grid to the image,
bilinear; dimmed where the word does not look, a white glow where it does); one row for soft
attention (a distribution over the regions), one for hard (the one region read). Writes
`--figure` (default `OUT/show_attend_tell_attention.png`) and prints the captions.

References:
    Xu, Ba, Kiros, Cho, Courville, Salakhutdinov, Zemel and Bengio, 2015, "Show, Attend and
    Tell: Neural Image Caption Generation with Visual Attention", arXiv:1502.03044.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import matplotlib  # noqa: E402
import numpy as np  # noqa: E402

from keras_attn.training.trainer import METRICS_FILE, TrainConfig, train  # noqa: E402
from keras_attn.vision import scene_splits  # noqa: E402
from keras_attn.vision.scenes import DEFAULT_SPLIT_SIZES  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ARMS = ("soft", "hard")


def train_config(attention: str, args: argparse.Namespace) -> TrainConfig:
    """A show-attend-tell run with `attention` at the example's budget."""
    sizes = (
        {"embedding_dim": 8, "units": 16} if args.quick else {"embedding_dim": 128, "units": 256}
    )
    return TrainConfig(
        model="show-attend-tell",
        corpus="scenes-32" if args.quick else "scenes",
        options={"attention": attention, "penalty": 0.05, **sizes},
        train_examples=32 if args.quick else DEFAULT_SPLIT_SIZES["train"],
        steps=args.steps,
        batch_size=8 if args.quick else 32,
        learning_rate=3e-3,
        warmup_steps=min(100, max(1, args.steps // 10)),
        seed=args.seed,
        eval_sentences=8 if args.quick else 100,
        checkpoint_every=args.steps,
    )


def trained_runs(args: argparse.Namespace) -> dict[str, Path]:
    """`{"soft": run, "hard": run}`: the given run directories, or two runs trained into
    `OUT/soft` and `OUT/hard` (a finished one is reused)."""
    if args.soft_run and args.hard_run:
        return {"soft": Path(args.soft_run), "hard": Path(args.hard_run)}
    runs = {}
    for attention in ARMS:
        run_dir = Path(args.out) / attention
        if not (run_dir / METRICS_FILE).is_file():
            train(
                run_dir,
                train_config(attention, args),
                resume=run_dir.exists(),
                progress=False,
                log=lambda line, name=attention: print(f"{name}: {line}", flush=True),
            )
        runs[attention] = run_dir
    return runs


def held_out_scenes(run_dir: Path, count: int, objects: int) -> list:
    """The first `count` test scenes with `objects` objects of the run's corpus (never shown in
    its training)."""
    from keras_attn.formats import RunDirectory
    from keras_attn.training.tasks.captioning import scene_image_size

    config = TrainConfig.from_fields(RunDirectory(run_dir).read_config_fields())
    train_size = config.train_examples or DEFAULT_SPLIT_SIZES["train"]
    sizes = {"train": train_size, "dev": DEFAULT_SPLIT_SIZES["dev"], "test": 200}
    scenes = scene_splits(config.seed, sizes, scene_image_size(config.corpus))["test"]
    chosen = [scene for scene in scenes if len(scene.objects) == objects][:count]
    if len(chosen) < count:
        raise ValueError(
            f"Expected {count} test scenes with {objects} objects; found {len(chosen)}. "
            f"Received: --objects {objects}"
        )
    return chosen


def caption_with_attention(run_dir: Path, scenes) -> list[tuple[list[str], np.ndarray]]:
    """`(words, attention (len(words), H', W'))` of each scene: the run's greedy caption and the
    attention map of the step that emitted each word."""
    import tensorflow as tf

    from keras_attn.export.captioner import MAX_CAPTION_TOKENS, Captioner
    from keras_attn.formats import RunDirectory
    from keras_attn.models.families import get_family

    run = RunDirectory(run_dir)
    model = run.load_model()
    family = get_family(run.read_config_fields()["model"])
    steps = family.decoding_steps(model, MAX_CAPTION_TOKENS)
    captioner = Captioner(model, steps, run.tokenizer(), MAX_CAPTION_TOKENS)
    outputs = captioner.caption_pixels(tf.constant(np.stack([scene.image for scene in scenes])))
    results = []
    captions, maps = outputs["caption"].numpy(), outputs["attention"].numpy()
    for caption, attention in zip(captions, maps, strict=True):
        words = caption.decode("utf-8").split()
        results.append((words, attention[: len(words)]))
    return results


def upsample(attention: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A `(H', W')` map resized to the image `size` (bilinear), scaled to a maximum of 1."""
    import tensorflow as tf

    resized = tf.image.resize(attention[:, :, None], size, method="bilinear").numpy()[:, :, 0]
    peak = resized.max()
    return resized / peak if peak > 0 else resized


def draw_figure(scenes, captions: dict[str, list], path: Path) -> None:
    """Per scene, one row per attention kind: the image, then the image lit by each word's
    attention map (`captions[kind][i] = (words, attention)`)."""
    rows = [(scene, kind, *captions[kind][i]) for i, scene in enumerate(scenes) for kind in ARMS]
    columns = 1 + max(len(words) for _, _, words, _ in rows)
    figure, axes = plt.subplots(
        len(rows), columns, figsize=(0.95 * columns, 1.1 * len(rows)), squeeze=False
    )
    for axis in axes.flat:
        axis.axis("off")
    for row, (scene, kind, words, attention) in enumerate(rows):
        image = scene.image.astype("float32") / 255.0
        axes[row, 0].imshow(image)
        axes[row, 0].set_title(kind, fontsize=7)
        for t, word in enumerate(words):
            # Dimmed where the word does not look, a white glow where it does.
            light = upsample(attention[t], image.shape[:2])[:, :, None]
            axes[row, t + 1].imshow(np.clip(image * (0.3 + 0.7 * light) + 0.45 * light, 0, 1))
            axes[row, t + 1].set_title(word, fontsize=7)
    figure.tight_layout(pad=0.2)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=72)
    plt.close(figure)


def run_example(args: argparse.Namespace) -> dict:
    """Train or load the two runs, caption the held-out scenes and draw the figure.

    Returns:
        `{"scenes", "soft", "hard", "figure"}`: the scenes, per kind `(words, attention)` per
        scene, and the figure's path.
    """
    runs = trained_runs(args)
    scenes = held_out_scenes(runs["soft"], args.images, args.objects)
    results = {"scenes": scenes}
    for kind in ARMS:
        results[kind] = caption_with_attention(runs[kind], scenes)
    figure = Path(args.figure) if args.figure else Path(args.out) / "show_attend_tell_attention.png"
    draw_figure(scenes, results, figure)
    for i, scene in enumerate(scenes):
        print(f"reference: {scene.caption}")
        for kind in ARMS:
            print(f"{kind:>9}: {' '.join(results[kind][i][0])}")
    print(f"wrote {figure}")
    results["figure"] = figure
    return results


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--out", default="show_attend_tell", help="where runs and figure go")
    parser.add_argument("--soft-run", help="a finished soft-attention run directory")
    parser.add_argument("--hard-run", help="a finished hard-attention run directory")
    parser.add_argument("--steps", type=int, default=600, help="training steps of each run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--images", type=int, default=2, help="held-out scenes drawn")
    parser.add_argument("--objects", type=int, default=2, help="objects in each drawn scene")
    parser.add_argument("--figure", help="the PNG to write (default OUT/...)")
    parser.add_argument("--quick", action="store_true", help="tiny models on 32-pixel scenes")
    args = parser.parse_args(argv)
    if bool(args.soft_run) != bool(args.hard_run):
        parser.error("--soft-run and --hard-run go together")
    if args.steps < 1 or args.images < 1 or args.objects not in (1, 2, 3, 4):
        parser.error(
            f"--steps and --images must be positive and --objects in 1..4, got {args.steps}, "
            f"{args.images}, {args.objects}"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    run_example(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
