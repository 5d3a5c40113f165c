"""`--init-from RUN`: start a run from another (pre-trained) run's weights, by layer name.

Fine-tuning builds its own model (a classifier on a BERT, a translator on a BART, ...) whose
layers reuse the pre-trained model's names; `initialize_from` copies every layer whose name
both models share and reports what was loaded, what is new and what was left unused. The
vocabularies come from the pre-trained run too (`keras_attn.training.tasks.base.Task.
build_vocabularies`), so token ids mean the same in both.
"""

from __future__ import annotations

import dataclasses

import keras

from keras_attn.errors import ConfigError, PathNotFoundError
from keras_attn.formats import MODEL_FILE, RunDirectory
from keras_attn.training.config import FAMILY_OPTIONS, TrainConfig


def check_init_run(init_run: RunDirectory) -> dict:
    """The fields of `init_run`'s config; a `PathNotFoundError` unless it is a finished run."""
    if not init_run.exists():
        raise PathNotFoundError(
            f"init_from {init_run.path} is not a run directory (no config.json)", ["init_from"]
        )
    if not init_run.file(MODEL_FILE).exists():
        raise PathNotFoundError(
            f"init_from {init_run.path} has no {MODEL_FILE}: its training did not finish",
            ["init_from"],
        )
    return init_run.read_config_fields()


def resolve_init_config(config: TrainConfig, init_run: RunDirectory, log) -> TrainConfig:
    """`config` with the architecture options it leaves unset taken from `init_run`'s config.

    The family options (`num_layers`, `d_model`, ...) that both runs' families take and that
    `config` leaves at None get the pre-trained run's values, so the new model has the shapes
    of the old one; a value given that differs from the pre-trained one is a `ConfigError`.
    """
    theirs = check_init_run(init_run)
    family = config.family()
    changes = {}
    for name in FAMILY_OPTIONS:
        value = theirs.get(name)
        if name not in family.hyperparameters or value is None:
            continue
        mine = getattr(config, name)
        if mine is None:
            changes[name] = value
        elif mine != value:
            raise ConfigError(
                f"{name}={mine} differs from the init_from run's {name}={value} (its weights "
                "have that shape)",
                [name, "init_from"],
            )
    if changes:
        log(f"from init_from {init_run.path}: " + ", ".join(f"{k}={v}" for k, v in changes.items()))
    return dataclasses.replace(config, **changes)


def _weighted_layers(model: keras.Model) -> dict[str, keras.layers.Layer]:
    return {layer.name: layer for layer in model.layers if layer.weights}


def initialize_from(model: keras.Model, init_run: RunDirectory, log) -> dict:
    """Copy into `model` the weights of every layer of `init_run`'s model with the same name.

    Returns:
        `{"init_from": path, "loaded": [...], "new": [...], "unused": [...]}`: the names of the
        layers whose weights were copied, of `model`'s layers with no pre-trained counterpart
        (they keep their initial weights) and of pre-trained layers `model` does not have.

    Raises:
        ConfigError: a layer of both models whose weights differ in number or shape (a
            different vocabulary or architecture); nothing is copied then.
    """
    check_init_run(init_run)
    pretrained = init_run.load_model()
    theirs = _weighted_layers(pretrained)
    mine = _weighted_layers(model)
    loaded, new = [], []
    for name, layer in mine.items():
        source = theirs.get(name)
        if source is None:
            new.append(name)
            continue
        wanted = [tuple(w.shape) for w in layer.weights]
        given = [tuple(w.shape) for w in source.weights]
        if wanted != given:
            raise ConfigError(
                f"layer {name!r} of init_from {init_run.path} has weights of shapes {given}, "
                f"this model's has {wanted} (a different vocabulary or architecture)",
                ["init_from"],
            )
        loaded.append(name)
    for name in loaded:
        mine[name].set_weights(theirs[name].get_weights())
    unused = [name for name in theirs if name not in mine]
    log(
        f"init_from {init_run.path}: loaded {len(loaded)} layers ({', '.join(loaded) or 'none'}); "
        f"new: {', '.join(new) or 'none'}; unused: {', '.join(unused) or 'none'}"
    )
    return {"init_from": str(init_run.path), "loaded": loaded, "new": new, "unused": unused}
