"""Training you can watch: dev evaluations written to TensorBoard while a run trains.

With `eval_every` N (`keras-attn train --eval-every N`), every N steps and at the end the chief
evaluates the model on the dev split and writes to `logs/dev/` (next to the training scalars in
`logs/`, so TensorBoard draws the dev curve over the training one under the same tag):

- `loss`: the training loss on the dev examples (teacher-forced, dropout off);
- the task's dev metrics (`Task.evaluate`): BLEU, exact match and ROUGE for translators,
  accuracy for classifiers, perplexity for language models, caption BLEU for captioners;
- `attention/<i>`: pictures of the attention of a few fixed dev examples (`Task.attention_images`):
  alignment heatmaps for translators, each word's attention map over the image for captioners, so
  the attention can be watched sharpening as training goes.

The training writer adds `learning_rate` and `gradient_norm` (before clipping) to `loss` and
`token_accuracy` every 50 steps.
"""

from __future__ import annotations

import dataclasses
import io
import math
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_attn.formats import LOGS, RunDirectory
from keras_attn.models.families import ModelFamily
from keras_attn.training.config import TrainConfig

DEV_LOGS = "dev"  # the subdirectory of `logs/` the dev scalars and images go to
ATTENTION_EXAMPLES = 3  # the fixed dev examples whose attention is drawn


class DevWatcher:
    """Writes dev evaluations of a run to `logs/dev/` (see the module docstring)."""

    def __init__(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily, task, splits: dict
    ):
        self._run, self._config, self._family, self._splits = run, config, family, splits
        self._task = task  # the family's `keras_attn.training.tasks.base.Task`
        self._writer = tf.summary.create_file_writer(str(run.file(LOGS) / DEV_LOGS))

    def evaluate(self, model, step: int) -> dict:
        """Evaluates `model` on dev (`Task.evaluate`), writes it all at `step`; returns the
        task's metrics."""
        metrics = self._task.evaluate(self._run, self._config, self._family, model, self._splits)
        self.write(model, step, metrics)
        return metrics

    def write(self, model, step: int, metrics: dict) -> None:
        """Writes `metrics` (the task's dev metrics of `model`), the dev loss and the attention
        pictures at `step`."""
        loss = dev_loss(self._task, self._run, self._config, self._family, model, self._splits)
        images = self._task.attention_images(
            self._run, self._config, self._family, model, self._splits, ATTENTION_EXAMPLES
        )
        with self._writer.as_default(step=step):
            if loss is not None:
                tf.summary.scalar("loss", loss)
            for name, value in scalar_metrics(metrics).items():
                tf.summary.scalar(name, value)
            for i, image in enumerate(images):
                if image is not None:
                    tf.summary.image(f"attention/{i}", image[None], step=step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def scalar_metrics(metrics: dict) -> dict[str, float]:
    """The finite numbers of a task's metrics, named for TensorBoard: `dev_bleu` → `bleu` (the
    writer's directory says dev), other splits keep their prefix; counts of sentences are left
    out."""
    scalars = {}
    for name, value in metrics.items():
        if name.endswith("_sentences") or isinstance(value, bool):
            continue
        if isinstance(value, int | float) and math.isfinite(value):
            scalars[name.removeprefix("dev_")] = float(value)
    return scalars


def dev_loss(task, run, config: TrainConfig, family: ModelFamily, model, splits: dict):
    """The task's training loss (`Task.loss`) over the first `eval_sentences` dev examples,
    teacher-forced and without dropout, weighted by each batch's labels; None without any."""
    examples = splits.get("dev") or []
    examples = examples[: config.eval_sentences]
    if not examples:
        return None
    batch_size = min(config.batch_size, len(examples))
    plan = task.plan(run, dataclasses.replace(config, batch_size=batch_size), family, examples)
    total = count = 0.0
    for step in range(plan.batches_per_epoch):
        features, labels = plan.batch(step)
        loss, _ = task.loss(labels, model(features, training=False), config)
        labelled = float(plan.count_labels(labels))
        total, count = total + float(loss) * labelled, count + labelled
    return total / count if count else None


def alignment_image(
    source_tokens: Sequence[str], target_tokens: Sequence[str], weights: np.ndarray, title: str
) -> np.ndarray:
    """A heatmap of an alignment (target tokens down, source tokens across) as an RGBA uint8
    image `(height, width, 4)`, drawn with matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    weights = np.asarray(weights, dtype=np.float32)
    figure, axes = plt.subplots(
        figsize=(1.2 + 0.45 * len(source_tokens), 1.0 + 0.35 * len(target_tokens)), dpi=80
    )
    try:
        axes.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        axes.set_xticks(range(len(source_tokens)), source_tokens, rotation=60, ha="right")
        axes.set_yticks(range(len(target_tokens)), target_tokens)
        axes.set_title(title, fontsize=9)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", bbox_inches="tight")  # room for the labels
    finally:
        plt.close(figure)
    return tf.io.decode_png(buffer.getvalue(), channels=4).numpy()


def overlay_image(
    image: np.ndarray, words: Sequence[str], maps: np.ndarray, title: str
) -> np.ndarray:
    """The image, then one panel per word with that word's attention map over the image (the
    map stretched to the image's size, brighter where the weight is higher), as an RGBA uint8
    image drawn with matplotlib.

    Args:
        image: uint8 `(height, width, 3)`.
        words: the caption's words.
        maps: `(len(words), H', W')` weights on the image's grid of regions.
        title: the figure's title (the caption).
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    height, width = image.shape[:2]
    figure, axes = plt.subplots(1, len(words) + 1, figsize=(1.6 * (len(words) + 1), 2.0), dpi=80)
    try:
        for panel, (axis, word) in enumerate(zip(axes, ["", *words], strict=True)):
            axis.imshow(image)
            if panel:
                weights = np.asarray(maps[panel - 1], dtype=np.float32)
                axis.imshow(
                    weights,
                    cmap="gray",
                    alpha=0.6,
                    vmin=0.0,
                    vmax=max(float(weights.max()), 1e-6),
                    extent=(-0.5, width - 0.5, height - 0.5, -0.5),  # the map over the whole image
                    interpolation="bilinear",
                )
            axis.set_title(word, fontsize=9)
            axis.axis("off")
        figure.suptitle(title, fontsize=9)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", bbox_inches="tight")
    finally:
        plt.close(figure)
    return tf.io.decode_png(buffer.getvalue(), channels=4).numpy()
