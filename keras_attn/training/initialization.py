"""`--init-from RUN` and `--vocab-from RUN`: start a run from another run's weights or vocabularies.

Fine-tuning builds its own model (a classifier on a BERT, a translator on a BART, ...) whose
layers reuse the pre-trained model's names; `initialize_from` copies every layer whose name
both models share and reports what was loaded, what is new and what was left unused. The
vocabularies come from the pre-trained run too (`keras_attn.training.tasks.base.Task.
build_vocabularies`), so token ids mean the same in both.

Before anything is written, `check_origin_run` refuses a run this one cannot start from: a run of
a family of another kind (`starts_from`), one without the vocabularies this run takes or whose
vocabularies lack this run's reserved tokens, or one whose options that shape the weights
(`SHAPE_OPTIONS`) differ from this run's. The layer-by-layer shape check of `initialize_from`
catches what these do not.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from keras_attn.errors import ConfigError
from keras_attn.formats import RunDirectory
from keras_attn.training.config import TrainConfig
from keras_attn.training.paths import check_origin

if TYPE_CHECKING:
    import keras

    from keras_attn.models.families import ModelFamily

# Options that shape the weights: a run started from another run's weights that gives one of
# them must give the other run's value when both families take the option.
SHAPE_OPTIONS = ("embedding_dim", "units", "cell", "num_layers", "d_model", "num_heads", "ff_dim")


def starts_from(family: ModelFamily, name: str, origin: ModelFamily, origin_name: str) -> bool:
    """Whether family `name` can start from the weights of a run of family `origin_name`.

    A family starts from runs of its own family, and from runs of any family with the same
    pre-trained `backbone` (a bert-classifier from a bert or a bert-tagger run, a bart-translator
    from a bart run): the layers they share have the same names and roles.
    """
    if name == origin_name:
        return True
    return family.backbone not in (None, "none") and family.backbone == origin.backbone


def _origins(family: ModelFamily, name: str) -> list[str]:
    """The families whose runs family `name` starts from."""
    from keras_attn.models.families import MODEL_FAMILIES

    return [
        other for other, each in MODEL_FAMILIES.items() if starts_from(family, name, each, other)
    ]


def _prefix(config: TrainConfig, out, field: str, path, theirs: str) -> str:
    """How every refusal begins: this run (with its family) and the other run (with its)."""
    taking = "start from" if field == "init_from" else "take the vocabularies of"
    return (
        f"this run ({out}, model={config.model!r}) cannot {taking} {field} {path} (a {theirs} run)"
    )


def resolve_init_config(
    config: TrainConfig, init_run: RunDirectory, log, out: object = "out"
) -> TrainConfig:
    """`config` with the options it does not give taken from `init_run`'s config.

    Every option of this run's family that `config.options` does not give and `init_run`'s
    config has gets the pre-trained run's value, so the new model has the shapes of the old one;
    a value of `SHAPE_OPTIONS` given that differs from the pre-trained one is a `ConfigError`
    naming both runs (`out` is this one's directory).
    """
    fields = check_origin(init_run.path, "init_from")
    theirs = TrainConfig.from_fields(fields).options or {}
    given = config.options or {}
    for name in SHAPE_OPTIONS:
        if name in given and name in theirs and given[name] != theirs[name]:
            prefix = _prefix(config, out, "init_from", init_run.path, fields.get("model", "?"))
            raise ConfigError(
                f"{prefix}: {name}={given[name]!r} here, {name}={theirs[name]!r} there (its "
                f"weights have that shape; leave {name} unset to take it)",
                [name, "init_from", "model"],
            )
    names = config.family().option_names
    taken = {name: value for name, value in theirs.items() if name in names and name not in given}
    if not taken:
        return config
    log(f"from init_from {init_run.path}: " + ", ".join(f"{k}={v}" for k, v in taken.items()))
    return dataclasses.replace(config, options={**taken, **given})


def check_origin_run(config: TrainConfig, family: ModelFamily, out, field: str) -> None:
    """Raise a `ConfigError` unless this run can start from the run `config.<field>` names.

    `field` is `init_from` (weights and vocabularies) or `vocab_from` (vocabularies only). The
    message names both runs and what does not match: the family kind (`starts_from`, for
    `init_from`), a vocabulary this run takes that the other run lacks, the reserved tokens
    this run's vocabularies need.
    """
    from keras_attn.models.families import get_family
    from keras_attn.text.vocab import load_vocab
    from keras_attn.training.tasks import get_task

    path = getattr(config, field)
    fields = check_origin(path, field)
    origin_run = RunDirectory(path)
    theirs = fields.get("model", "?")
    prefix = _prefix(config, out, field, origin_run.path, theirs)
    at_fault = [field, "model"]
    try:
        origin = get_family(theirs)
    except ConfigError:
        raise ConfigError(
            f"{prefix}: this installation has no model {theirs!r}", at_fault
        ) from None
    if field == "init_from" and not starts_from(family, config.model, origin, theirs):
        raise ConfigError(
            f"{prefix}: {config.model} starts from runs of "
            f"{', '.join(_origins(family, config.model))}",
            at_fault,
        )
    task = get_task(family.task)
    reserved = task.vocabularies(config, family)
    for mine, source in task.inherited_vocabularies(config, family, theirs).items():
        if not origin_run.file(source).exists():
            raise ConfigError(
                f"{prefix}: it has no {source}, the vocabulary this run's {mine} is copied from",
                at_fault,
            )
        tokens = set(load_vocab(origin_run.file(source)))
        missing = [token for token in reserved[mine] if token not in tokens]
        if missing:
            raise ConfigError(
                f"{prefix}: its {source} lacks the reserved tokens {' '.join(missing)} that "
                f"this run's {mine} needs",
                at_fault,
            )


def _weighted_layers(model: keras.Model) -> dict[str, keras.layers.Layer]:
    return {layer.name: layer for layer in model.layers if layer.weights}


def initialize_from(model: keras.Model, init_run: RunDirectory, log, out=None) -> dict:
    """Copy into `model` the weights of every layer of `init_run`'s model with the same name.

    Args:
        model: the new run's model, built.
        init_run: the finished run to start from.
        log: called with one line on what was loaded.
        out: the new run's directory, named in the error message.

    Returns:
        `{"init_from": path, "loaded": [...], "new": [...], "unused": [...]}`: the names of the
        layers whose weights were copied, of `model`'s layers with no pre-trained counterpart
        (they keep their initial weights) and of pre-trained layers `model` does not have.

    Raises:
        ConfigError: a layer of both models whose weights differ in number or shape (a
            different vocabulary or architecture); nothing is copied then.
    """
    fields = check_origin(init_run.path, "init_from")
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
            here = "this run" if out is None else f"this run ({out})"
            raise ConfigError(
                f"{here} cannot start from init_from {init_run.path} (a "
                f"{fields.get('model', '?')} run): its layer {name!r} has weights of shapes "
                f"{given}, this run's {wanted} (a different vocabulary or architecture)",
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
