"""`Family`: the public protocol of a model family, and the registry `keras-attn train` reads.

A family is one object: its name, its kind (what it is trained and exported as), an options
dataclass whose fields are its hyperparameters (the field metadata gives the help, choices and
range of each `keras-attn train` flag; an optional `validate` method checks them together), a
builder, and for the generating kinds a
step-contract view for decoding. The built-in families (`keras_attn.models.families`) and a
user's own (`register_family`, `keras-attn train --model-file my_model.py`) are looked up here
alike.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import ConfigError
from keras_attn.options import OPTION_METADATA, check_option, option_kind

# Kinds and the training task (`keras_attn.training.tasks`) of each; a pre-training family
# names its task ("masked_lm" or "denoising").
KINDS = (
    "translator",
    "generator",
    "captioner",
    "classifier",
    "tagger",
    "pretraining",
    "answerer",
)
TASK_KINDS = {
    "translation": "translator",
    "language_model": "generator",
    "captioning": "captioner",
    "classification": "classifier",
    "tagging": "tagger",
    "masked_lm": "pretraining",
    "denoising": "pretraining",
    "question_answering": "answerer",
}
KIND_TASKS = {
    "translator": "translation",
    "generator": "language_model",
    "captioner": "captioning",
    "classifier": "classification",
    "tagger": "tagging",
    "answerer": "question_answering",
}
# The kinds `keras-attn export` writes as a served model (with a step view).
EXPORTED_KINDS = ("translator", "generator", "captioner", "classifier", "tagger", "answerer")
# The kinds exported with a decoding loop over the family's step view.
DECODED_KINDS = ("translator", "generator", "captioner")

# Every family `get_family` knows, by name: the built-in ones and those registered since.
MODEL_FAMILIES: dict[str, Family] = {}


@keras_attn_export("keras_attn.models.Family")
@dataclass(frozen=True, kw_only=True)
class Family:
    """A model family: how `keras-attn train` builds, trains and exports its models.

    `build` receives the vocabulary sizes (positional) and the options as keywords; what else
    depends on `kind`:

    - "translator": `build(source_vocabulary_size, target_vocabulary_size, **options)` returns a
      model from `{"source_ids", "target_ids"}` to logits `(batch, T_y, target_vocabulary)`,
      decoded by `steps(model).encode/step` (e.g. `keras_attn.models.RNNTranslatorSteps`);
    - "generator": `build(vocabulary_size, max_length=positions, **options)` returns a model
      from `token_ids` to next-token logits, decoded by `steps(model, max_length).prefill/step`;
    - "captioner": `build(vocabulary_size, image_size, **options)` returns a model from
      `{"images", "target_ids"}` to `{"logits", "attention"}`;
    - "classifier" and "tagger": `build(vocabulary_size, num_outputs, **options)`;
    - "answerer": `build(vocabulary_size, num_answers, image_size, **options)` returns a model
      from `{"images", "question_ids"}` to `{"logits", "attention"}` (visual question
      answering);
    - "pretraining": `build(vocabulary_size, **options)`, with `task` "masked_lm" (BERT's
      objectives) or "denoising" (BART's).

    Args:
        name: the name `--model` and `get_family` take.
        kind: one of `KINDS`; it chooses the training task, and for a translator, generator or
            captioner with a `steps` view the export. Derived from `task` when only that is
            given.
        options: a dataclass type whose fields are the family's hyperparameters, each with its
            default and `metadata` `{"help": str, and optionally "choices": tuple, a range
            ("min", "above", "max", "below": numbers) and "float32": bool}` (see
            `keras_attn.options`); the values, defaults filled in, are `build`'s keyword
            arguments, and each field is a `keras-attn train` flag (`attention_units` ->
            `--attention-units`). A method `validate(self)` of the dataclass, if it has one,
            checks the values together once each has passed its own checks (e.g. a width the
            number of heads divides), raising a `ConfigError` naming the options at fault.
            None: the family takes no options.
        build: the model builder (see above).
        steps: the step-contract view of a built model, for decoding (None: not exported).
        sized_steps: whether `steps(model, max_length=...)` preallocates caches for
            `max_length` tokens.
        learning_rate, warmup_steps, schedule: the training schedule `keras-attn train` uses
            for each of `--learning-rate`, `--warmup-steps` and `--schedule` not given.
        task: the training task; derived from `kind` unless the kind is "pretraining".
        reserved_tokens: the vocabularies' reserved tokens, when not the plain ones.
        shares_vocabulary: option values -> whether source and target share one vocabulary.
        vocabulary_origin: option values -> `{"source" | "target" | "single": the side of an
            `--init-from` run it is copied from}`.
        encoder_layers: layers trained by the encoder optimizer when the run sets
            `encoder_learning_rate`.
        backbone: the pre-trained architecture the model is, or is built on ("bert", "gpt",
            "bart"; "none" for a classifier trained from scratch only): `--init-from` starts a
            family from runs of its own family or of a family on the same backbone.

    Raises:
        ConfigError: a kind not in `KINDS`, a task that is not the kind's, or an options type
            that is not a dataclass of flag-able fields.

    Example:

    >>> @dataclasses.dataclass(frozen=True)
    ... class Options:
    ...     units: int = dataclasses.field(default=32, metadata={"help": "width", "min": 2})
    >>> family = Family(name="tiny", kind="translator", options=Options, build=print)
    >>> family.task, family.option_values({"units": 8})
    ('translation', {'units': 8})
    """

    name: str | None = None
    kind: str | None = None
    options: type | None = None
    build: Callable[..., Any]
    steps: Callable[..., object] | None = None
    sized_steps: bool = False
    learning_rate: float = 3e-3
    warmup_steps: int = 100
    schedule: str = "cosine"
    task: str | None = None
    reserved_tokens: tuple[str, ...] | None = None
    shares_vocabulary: Callable[[dict], bool] | None = None
    vocabulary_origin: Callable[[dict], dict[str, str]] | None = None
    encoder_layers: tuple[str, ...] = ()
    backbone: str | None = None

    def __post_init__(self) -> None:
        kind, task = self.kind, self.task
        if kind is None and task is None:
            kind = "translator"
        if kind is None:
            if task not in TASK_KINDS:
                raise ConfigError(
                    f"Expected task in {{{', '.join(TASK_KINDS)}}}. Received: task={task!r}",
                    ["task"],
                )
            kind = TASK_KINDS[task]
        if kind not in KINDS:
            raise ConfigError(
                f"Expected kind in {{{', '.join(KINDS)}}}. Received: kind={kind!r}", ["kind"]
            )
        if task is None:
            if kind not in KIND_TASKS:
                raise ConfigError(
                    "a pretraining family names its task: task='masked_lm' or task='denoising'",
                    ["task", "kind"],
                )
            task = KIND_TASKS[kind]
        if TASK_KINDS.get(task) != kind:
            raise ConfigError(f"task={task!r} is not a task of kind={kind!r}", ["task", "kind"])
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "task", task)
        if not callable(self.build):
            raise ConfigError(f"build must be callable, got {self.build!r}", ["build"])
        if self.options is not None:
            option_fields(self.options)  # refuses what no flag can carry

    @property
    def language_model(self) -> bool:
        """Whether this is a causal language model (one vocabulary, exported as a generator)."""
        return self.kind == "generator"

    @property
    def exportable(self) -> bool:
        """Whether `keras-attn export` exports this family: a classifier, tagger or answerer,
        or a translator, generator or captioner with a step view."""
        if self.kind in DECODED_KINDS:
            return self.steps is not None
        return self.kind in EXPORTED_KINDS

    @property
    def option_names(self) -> tuple[str, ...]:
        """The names of the family's options: the fields of `options`."""
        if self.options is None:
            return ()
        return tuple(field.name for field in dataclasses.fields(self.options))

    def training_defaults(self) -> dict[str, Any]:
        """`{"learning_rate", "warmup_steps", "schedule"}`: the family's training schedule."""
        return {
            "learning_rate": self.learning_rate,
            "warmup_steps": self.warmup_steps,
            "schedule": self.schedule,
        }

    def option_values(self, given: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every option's value: `given`'s, else the field default, each checked, then all
        together by the options dataclass' `validate` method, if it has one.

        Args:
            given: option name -> value.

        Returns:
            `{option: value}` for every field of `options`, in field order: `build`'s keyword
            arguments.

        Raises:
            ConfigError: naming the options at fault, for a name that is no option, a value of
                the wrong type, not among the field's `choices` or out of its range, or values
                `validate` refuses.
        """
        given = dict(given or {})
        fields = option_fields(self.options) if self.options is not None else {}
        unknown = sorted(set(given) - set(fields))
        if unknown:
            raise ConfigError(
                f"{', '.join(unknown)} {'does' if len(unknown) == 1 else 'do'} not apply to "
                f"model={self.name!r} (its options: {', '.join(fields) or 'none'})",
                [*unknown, "model", *fields],
            )
        values = {}
        for name, (field, kind) in fields.items():
            value = given.get(name, field.default)
            values[name] = check_option(name, value, kind, field.metadata)
        validate = getattr(self.options, "validate", None)
        if validate is not None:
            validate(self.options(**values))
        return values

    def builder_defaults(self) -> dict[str, Any]:
        """`{option: default}` for every field of `options`: what `build` gets for the options
        not given."""
        if self.options is None:
            return {}
        return {field.name: field.default for field in dataclasses.fields(self.options)}

    def shared_vocabulary(self, options: dict) -> bool:
        """Whether a translator with these option values shares one vocabulary between source
        and target."""
        return self.shares_vocabulary is not None and self.shares_vocabulary(options)

    def decoding_steps(self, model: Any, max_length: int) -> object:
        """The step-contract view of `model` for decoding loops of at most `max_length` tokens."""
        if self.sized_steps:
            return self.steps(model, max_length=max_length)
        return self.steps(model)


def option_fields(options: type) -> dict[str, tuple[dataclasses.Field, type]]:
    """`{name: (field, value type)}` of an options dataclass; a ConfigError for a field no
    `keras-attn train` flag can carry (no default, a type other than bool, int, float or str
    (or one of them | None), or unknown metadata keys)."""
    if not (isinstance(options, type) and dataclasses.is_dataclass(options)):
        raise ConfigError(f"options must be a dataclass type, got {options!r}", ["options"])
    hints = typing.get_type_hints(options)
    fields = {}
    for field in dataclasses.fields(options):
        kind = option_kind(hints[field.name])
        if kind is None:
            raise ConfigError(
                f"option {field.name} of {options.__name__} has type {hints[field.name]}: an "
                "option is a bool, int, float or str (or None)",
                ["options"],
            )
        if field.default is dataclasses.MISSING:
            raise ConfigError(
                f"option {field.name} of {options.__name__} has no default", ["options"]
            )
        unknown = sorted(set(field.metadata) - set(OPTION_METADATA))
        if unknown:
            raise ConfigError(
                f"option {field.name} of {options.__name__} has metadata {', '.join(unknown)}; "
                f"expected keys: {', '.join(OPTION_METADATA)}",
                ["options"],
            )
        fields[field.name] = (field, kind)
    return fields


@keras_attn_export("keras_attn.models.get_family")
def get_family(name: str) -> Family:
    """The family called `name`, built-in or registered.

    Raises:
        ConfigError: an unknown name (the message lists the known ones).
    """
    if name not in MODEL_FAMILIES:
        raise ConfigError(
            f"Unknown model {name!r}. Expected one of: {', '.join(MODEL_FAMILIES)}", ["model"]
        )
    return MODEL_FAMILIES[name]


@keras_attn_export("keras_attn.models.register_family")
def register_family(family: Family | str, legacy: Family | None = None) -> Family:
    """Add `family` under `family.name`, so that `get_family` and `keras-attn train --model`
    find it.

    A `--model-file` passed to `keras-attn train` calls this for each family it defines.
    `register_family(name, family)`, the older form, registers `family` under `name`.

    Args:
        family: a `Family` with a name.

    Returns:
        The family registered.

    Raises:
        ConfigError: `family` is not a `Family`, has no name, or its name is taken (the
            built-in families stay as they are).
    """
    if isinstance(family, str):
        if not isinstance(legacy, Family):
            raise ConfigError(
                f"register_family takes a keras_attn.models.Family, got {legacy!r}", ["family"]
            )
        family = dataclasses.replace(legacy, name=family)
    if not isinstance(family, Family):
        raise ConfigError(
            f"register_family takes a keras_attn.models.Family, got {family!r}", ["family"]
        )
    if not family.name:
        raise ConfigError("a registered family needs a name", ["name"])
    if family.name in MODEL_FAMILIES:
        raise ConfigError(
            f"model family {family.name!r} is registered already: choose another name",
            ["name"],
        )
    MODEL_FAMILIES[family.name] = family
    return family


# sha256 of a model file's bytes -> the names of the families it registered (a file, or its
# copy in a run directory, runs once per process while they stay registered).
_LOADED: dict[str, tuple[str, ...]] = {}


@keras_attn_export("keras_attn.models.load_model_file")
def load_model_file(path: str | Path) -> tuple[Family, ...]:
    """Import the Python file `path` (by path), which registers families with `register_family`.

    A file with the same bytes as one loaded before (a run directory's copy of it) is not run
    again: the families it registered are returned. The file's own errors (a `SyntaxError`,
    an `ImportError`) propagate as they are.

    Returns:
        The families the file registered, in order.

    Raises:
        ConfigError: `path` is not a file, or the file registers no family (or one whose name
            is taken), naming `model_file`.
    """
    path = Path(path)
    if not path.is_file():
        missing = "does not exist" if not path.exists() else "is not a file"
        raise ConfigError(f"model_file {path} {missing}", ["model_file"])
    source = path.read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    loaded = _LOADED.get(digest, ())
    if not loaded or any(name not in MODEL_FAMILIES for name in loaded):
        name = f"model_file_{digest[:16]}"  # not under keras_attn: the user's module
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        before = set(MODEL_FAMILIES)
        sys.modules[name] = module  # dataclasses and Keras look classes up by module
        try:
            spec.loader.exec_module(module)
        except BaseException as error:
            sys.modules.pop(name, None)
            for added in set(MODEL_FAMILIES) - before:
                del MODEL_FAMILIES[added]
            if isinstance(error, ConfigError):
                raise ConfigError(f"model_file {path}: {error}", ["model_file"]) from error
            raise
        added = tuple(family for family in MODEL_FAMILIES if family not in before)
        if not added:
            sys.modules.pop(name, None)
            raise ConfigError(
                f"model_file {path} registers no model family: call "
                "keras_attn.models.register_family(Family(...)) in it",
                ["model_file"],
            )
        _LOADED[digest] = added
    return tuple(MODEL_FAMILIES[name] for name in _LOADED[digest])
