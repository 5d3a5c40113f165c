"""`Task`: what a model family trains on, how its loss is computed and how it is scored.

The trainer (`keras_attn.training.trainer`) runs the same resumable loop for every family; the
family's task supplies the parts that differ: the data and vocabularies, the batch plan, the
model, the loss and the dev evaluation.
"""

from __future__ import annotations

import abc
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from keras_attn.errors import ConfigError
from keras_attn.formats import SOURCE_VOCAB, TARGET_VOCAB, VOCAB, RunDirectory
from keras_attn.models.families import ModelFamily
from keras_attn.text.vocab import build_wordpiece_vocab, save_vocab
from keras_attn.training.config import TrainConfig
from keras_attn.training.data import BatchOrder

# The vocabulary files of the sides named by `ModelFamily.vocabulary_origin`.
VOCABULARY_FILES = {"source": SOURCE_VOCAB, "target": TARGET_VOCAB, "single": VOCAB}


class Task(abc.ABC):
    """The parts of a training run that depend on what is trained.

    Every method receives the run's resolved `TrainConfig` and `ModelFamily`. Data splits are
    whatever `load_data` returns (a dict with at least "train" and "dev"); the trainer passes
    them back unchanged.
    """

    @abc.abstractmethod
    def load_data(self, config: TrainConfig, family: ModelFamily) -> dict:
        """The run's data splits; a ValueError or FileNotFoundError for an unusable corpus."""

    @abc.abstractmethod
    def vocabularies(self, config: TrainConfig, family: ModelFamily) -> dict[str, list[str]]:
        """`{vocabulary file name: its reserved tokens}` of the run."""

    @abc.abstractmethod
    def vocabulary_text(self, name: str, config: TrainConfig, family: ModelFamily, train) -> list:
        """The sentences vocabulary `name` is built from when the run does not inherit it."""

    def inherited_vocabularies(
        self, config: TrainConfig, family: ModelFamily, origin_model: str | None = None
    ) -> dict[str, str]:
        """`{this run's vocabulary file: the other run's file}` under `--init-from`/`--vocab-from`.

        Each vocabulary from the file of the same name when the other run (of family
        `origin_model`) is of this run's family or this family has no `vocabulary_origin`;
        else the files `vocabulary_origin` names.
        """
        names = self.vocabularies(config, family)
        if family.vocabulary_origin is None or origin_model == config.model:
            return {name: name for name in names}
        origin = family.vocabulary_origin(config.model_hyperparameters(family))
        return {
            VOCABULARY_FILES[side]: VOCABULARY_FILES[theirs]
            for side, theirs in origin.items()
            if VOCABULARY_FILES[side] in names
        }

    @abc.abstractmethod
    def plan(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily, train
    ) -> BatchOrder:
        """The batch plan of the training split."""

    @abc.abstractmethod
    def describe(self, plan: BatchOrder) -> str:
        """A few words on the training data, e.g. "28000 training pairs"."""

    @abc.abstractmethod
    def build_model(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily
    ) -> keras.Model:
        """The model, built from the run's vocabularies and `config`'s hyperparameters."""

    def training_outputs(
        self, model: keras.Model, config: TrainConfig, family: ModelFamily
    ) -> Callable[[Any, tf.Variable], Any]:
        """`outputs(features, step)`: what `loss` scores for a batch at training step `step`.

        `step` is the run's step counter (the steps done before this one). The default is the
        model's training-mode call, `model(features, training=True)`; a task whose training
        pass depends on the step (scheduled sampling) returns its own. Called once per run,
        before the training step is traced.
        """
        return lambda features, step: model(features, training=True)

    def training_scalars(self, config: TrainConfig, step: int) -> dict[str, float]:
        """Values of step `step` the trainer logs to TensorBoard besides loss and accuracy."""
        return {}

    @abc.abstractmethod
    def loss(self, labels, outputs, config: TrainConfig) -> tuple:
        """`(loss, accuracy)` of a batch: float32 scalars, each a mean over its labels."""

    @abc.abstractmethod
    def evaluate(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily, model: keras.Model, data
    ) -> dict:
        """Dev metrics for `metrics.json` (`data`: the splits of `load_data`)."""

    @abc.abstractmethod
    def summary(self, metrics: dict) -> str:
        """One line on the evaluation's result."""

    def cached_evaluator(self, model: keras.Model, made_for: tuple, make: Callable[[], Any]):
        """`make()` (the translator or captioner that scores `model`), or the one made last
        when it was made for the same `model` and `made_for`: the evaluations of one run
        (`--eval-every`) reuse it, so its functions are traced once, not at every evaluation."""
        last = getattr(self, "_last_evaluator", None)
        if last is not None and last[0] is model and last[1] == made_for:
            return last[2]
        evaluator = make()
        self._last_evaluator = (model, made_for, evaluator)
        return evaluator

    def attention_images(
        self,
        run: RunDirectory,
        config: TrainConfig,
        family: ModelFamily,
        model: keras.Model,
        data,
        count: int,
    ) -> list:
        """Pictures of the model's attention on the first `count` dev examples, RGBA uint8
        arrays `(height, width, 4)` that `keras-attn train --eval-every` writes to TensorBoard
        (default: none). An example with nothing to draw (an empty translation) is None, so the
        others keep their places."""
        return []

    def prepare_run(
        self,
        run: RunDirectory,
        config: TrainConfig,
        family: ModelFamily,
        data: dict,
        log,
        init_run: RunDirectory | None = None,
    ) -> None:
        """Write what the run needs besides its config before training: its vocabularies."""
        self.build_vocabularies(run, config, family, data["train"], log, init_run)

    def build_vocabularies(
        self,
        run: RunDirectory,
        config: TrainConfig,
        family: ModelFamily,
        train,
        log,
        init_run: RunDirectory | None = None,
    ) -> None:
        """Write the vocabularies missing from `run`: copied from `init_run` (`init_from` or
        `vocab_from`) where this run inherits them, built from the training text otherwise."""
        inherited = {}
        if init_run is not None:
            origin_model = init_run.read_config_fields().get("model")
            inherited = self.inherited_vocabularies(config, family, origin_model)
        for name, reserved in self.vocabularies(config, family).items():
            if run.file(name).exists():
                if name in inherited and (
                    run.file(name).read_bytes() != init_run.file(inherited[name]).read_bytes()
                ):
                    raise ConfigError(
                        f"{run.file(name)} differs from {inherited[name]} of "
                        f"{init_run.path}: the run's vocabulary must be that one",
                        ["init_from", "vocab_from"],
                    )
                continue
            if name in inherited:
                source = init_run.file(inherited[name])
                if not source.exists():
                    raise ConfigError(
                        f"{init_run.path} has no {inherited[name]} for this run's {name}",
                        ["init_from", "vocab_from"],
                    )
                shutil.copyfile(source, run.temporary(name))
                os.replace(run.temporary(name), run.file(name))
                log(f"{name}: {inherited[name]} of {init_run.path}")
                continue
            started = time.perf_counter()
            texts = self.vocabulary_text(name, config, family, train)
            vocab = build_wordpiece_vocab(texts, config.vocab_size, reserved_tokens=reserved)
            save_vocab(run.temporary(name), vocab)
            os.replace(run.temporary(name), run.file(name))
            log(f"built {name}: {len(vocab)} tokens in {time.perf_counter() - started:.1f}s")
