"""`TrainConfig`: every option of a training run, with its default, choices and help.

The fields are the one definition of the run's options: `keras-attn train` takes its flags
(`--batch-size` for `batch_size`), defaults, choices and help text from them, and a run
directory's `config.json` holds their values.

This module imports neither TensorFlow nor Keras (the command line builds its parser from it
before either is loaded): the choices of the flags are the static tuples below, which
`tests/training/test_cli.py` checks against the registries they name, and `validate` imports
the model families when it runs.

A model family's options (`keras_attn.models.Family.options`: `units`, `d_model`, ...) are not
fields: `options` holds them by name, and a run's `config.json` saves them under `"options"`.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from keras_attn.errors import ConfigError
from keras_attn.options import OPTION_METADATA, check_option, option_kind
from keras_attn.training.precision import POLICIES, check_policy_name

if TYPE_CHECKING:
    from keras_attn.models.families import ModelFamily

# The names of the registries the flags choose from (`training.optimizers.OPTIMIZERS`,
# `training.schedules.SCHEDULES`, `training.scheduled_sampling.SCHEDULES`).
OPTIMIZERS = ("adam", "sgd")
SCHEDULES = ("cosine", "inverse-sqrt", "halving")
SAMPLING_SCHEDULES = ("linear", "exponential", "inverse-sigmoid")


# The range of a rate applied in float32: positive, finite, at most the largest float32.
RATE = {"above": 0, "float32": True}


def option(
    default: Any, help: str | None = None, choices: Any = None, flag: bool = True, **bounds: Any
) -> Any:
    """A `TrainConfig` field: its default, the help text and choices of its flag, and the range
    of its values (`bounds`: `min`, `above`, `max`, `below`, `float32`; see
    `keras_attn.options`), which `TrainConfig.validate` checks.

    `help` may name other options as `{field_name}`; the command line writes them as flags.
    `flag=False`: a field no flag of its own sets.
    """
    unknown = set(bounds) - set(OPTION_METADATA)
    if unknown:
        raise TypeError(f"option() got unknown bounds {sorted(unknown)}")
    return dataclasses.field(
        default=default, metadata={"help": help, "choices": choices, "flag": flag, **bounds}
    )


@dataclass
class TrainConfig:
    """Everything that defines a training run; saved as `config.json` in the run directory.

    The fields are the run's options; the model family's options (its builder's keyword
    arguments, `keras_attn.models.Family.options`) are `options`, by name: e.g.
    `TrainConfig(model="transformer", options={"d_model": 256, "num_heads": 8})`. Those not
    given take their defaults; `validate()` refuses a name the family does not take.
    """

    model: str = option(
        "rnn-attention",
        "model family. Translators: rnn-plain (no attention), rnn-attention, rnn-luong, "
        "transformer, bertsum (a BERT encoder under a new decoder), bart-translator. Language "
        "models (of the corpus' target side): gpt, rnn-lm (recurrent). Pre-training: bert "
        "(masked LM + next sentence), bart (denoising; mBART with {side} both). Classifiers: "
        "bert-classifier, gpt-classifier, bart-classifier, text-cnn; taggers: bert-tagger, "
        "bart-tagger (fine-tune with {init_from}). Image captioner: show-attend-tell (corpus "
        "scenes or scenes-N). Visual question answering: vqa-coattention (corpus scenes or "
        "scenes-N)",
    )
    model_file: str | None = option(
        None,
        "a Python file that defines model families and registers them with "
        "keras_attn.models.register_family (see docs/training.md): imported before the other "
        "flags are read; {model} chooses among its families (default: its only one), whose "
        "options become flags of this command. The run keeps a copy, model_file.py",
    )
    options: dict | None = option(
        None,
        "the options of the model family (its `Family.options` dataclass), by name; missing "
        "ones take their defaults",
        flag=False,
    )
    corpus: str = option(
        "synthetic",
        "corpus: synthetic, ding-de-en, bible-es-en, libreoffice-es-en, or PATH.tsv "
        "(source TAB target per line; see docs/corpora.md); pre-training: one or more, "
        "comma-separated; classifiers: source-id, language-id, synthetic-language-id or PATH.tsv "
        "(text TAB label); bert-tagger, bart-tagger: synthetic-tags (word classes of the "
        "synthetic English) or PATH.tsv (tokens TAB tags); show-attend-tell, vqa-coattention: "
        "scenes "
        "(generated 64-pixel scenes of coloured shapes) or scenes-N (N-pixel scenes)",
    )
    init_from: str | None = option(
        None,
        "a finished run directory: start from its weights (every layer of the same name) and "
        "its vocabularies (fine-tuning a pre-trained model). It must be a run of the same model "
        "family, or of one on the same pre-trained model: bert, bert-classifier, bert-tagger "
        "and bertsum; bart, bart-translator, bart-classifier and bart-tagger; gpt and "
        "gpt-classifier",
    )
    vocab_from: str | None = option(
        None,
        "a run directory whose vocabularies this run takes, but not its weights (a from-scratch "
        "baseline with the vocabulary of a pre-trained model)",
    )
    train_examples: int | None = option(
        None,
        "train on the first N examples of the training split only (default: all); those over "
        "{max_length} are then left out: metrics.json's training_examples counts what was used",
        above=0,
    )
    examples_per_class: int | None = option(
        None,
        "classification: keep N training sentences per class (default: all)",
        above=0,
    )
    steps: int = option(2000, "total training steps", above=0)
    batch_size: int = option(
        64,
        "examples per training step (with several replicas: over all of them together)",
        above=0,
    )
    learning_rate: float | None = option(
        None,
        "peak learning rate (default: the model family's, docs/training.md lists them)",
        **RATE,
    )
    warmup_steps: int | None = option(
        None,
        "steps until the peak learning rate (default: the model family's)",
        min=0,
    )
    encoder_learning_rate: float | None = option(
        None,
        "a second optimizer for the encoder (bertsum): its peak learning rate (default: one "
        "optimizer for the whole model)",
        **RATE,
    )
    encoder_warmup_steps: int | None = option(
        None,
        "the encoder optimizer's warm-up steps (default: {warmup_steps})",
        min=0,
    )
    schedule: str | None = option(
        None,
        "cosine: linear warm-up, cosine decay to 5%% of the peak at {steps}; inverse-sqrt: "
        "Vaswani et al.'s linear warm-up, then lr ~ step^-0.5; halving: Luong et al.'s constant "
        "rate, halved every {decay_every} steps from {decay_start} (all peak at "
        "{learning_rate}; default: the model family's)",
        SCHEDULES,
    )
    decay_start: int | None = option(None, "{schedule} halving: first halving's step")
    decay_every: int | None = option(None, "{schedule} halving: steps between halvings")
    optimizer: str = option("adam", "adam, or sgd: plain stochastic gradient descent", OPTIMIZERS)
    clipnorm: float = option(5.0, "clip the gradient's global norm (0: off)", min=0, float32=True)
    weight_decay: float = option(
        0.0,
        "decoupled weight decay (Loshchilov & Hutter, 2019; with {optimizer} adam, AdamW): "
        "each step also takes lr * this share off every weight, biases and normalisation "
        "scales and offsets excepted (0: off)",
        min=0,
        below=1,
    )
    label_smoothing: float = option(
        0.0,
        "move this much target probability mass to the uniform distribution (0: off)",
        min=0,
        below=1,
    )
    mixed_precision: str = option(
        "auto",
        "Keras dtype policy: float32, or mixed precision (float32 weights, computations in "
        "float16 with loss scaling or in bfloat16). auto picks mixed_bfloat16 on a TPU or on "
        "GPUs of compute capability 8.0 or more, mixed_float16 on older GPUs and float32 "
        "without an accelerator; the run prints its choice and saves it as precision in "
        "config.json and metrics.json, and a resumed run keeps it",
        POLICIES,
    )
    seed: int = option(
        0, "seed of the initial weights, dropout, data order and noising", min=0, max=2**32 - 1
    )
    max_length: int = option(80, "longest tokenized sentence", above=0)
    vocab_size: int = option(2000, "WordPiece size per side", above=0)
    side: str | None = option(
        None,
        "pre-training text (bert, bart): the corpus' source or target side, or both "
        "(multilingual: a language tag per document, mBART) (default: target)",
        ("source", "target", "both"),
    )
    mask_rate: float | None = option(
        None,
        "bert: share of tokens the masked LM predicts (default: 0.15); bart: share masked "
        "(default: 0.3)",
        above=0,
        below=1,
    )
    noises: str | None = option(
        None,
        "bart: comma-separated noising functions (default: text_infilling,sentence_permutation)",
    )
    scheduled_sampling: str | None = option(
        None,
        "scheduled sampling (Bengio et al., 2015), rnn-plain/rnn-attention/rnn-luong: each "
        "target token's decoder input is the gold previous token with probability epsilon_i "
        "(training step i), else a token sampled from the model's previous output; epsilon_i "
        "decays as linear: max({sampling_floor}, 1 - c i), exponential: k^i, inverse-sigmoid: "
        "k / (k + exp(i / k)) (default: off, teacher forcing)",
        SAMPLING_SCHEDULES,
    )
    sampling_constant: float | None = option(
        None,
        "the constant of {scheduled_sampling}: linear: the slope c in (0, 1] (default: 1e-4); "
        "exponential: k in (0, 1) (default: 0.9998); inverse-sigmoid: k >= 1 (default: 500); "
        "epsilon_i falls to 0.5 at step 0.5/c, -ln 2/ln k and k ln k respectively",
    )
    sampling_floor: float | None = option(
        None, "{scheduled_sampling} linear: the least epsilon_i, in [0, 1) (default: 0)"
    )
    checkpoint_every: int = option(200, "steps between checkpoints", above=0)
    eval_sentences: int = option(
        1000,
        "dev sentences (pre-training: dev examples) the final evaluation scores (0: skip)",
        min=0,
    )
    eval_every: int = option(
        0,
        "evaluate on dev every this many steps as well, writing dev loss, dev metrics and "
        "pictures of the attention to TensorBoard (logs/dev) (0: only the final evaluation)",
        min=0,
    )
    max_minutes: float | None = option(
        None,
        "stop the training loop after this many minutes of wall-clock time (checkpointed, "
        "evaluated and resumable like a finished run); a limit of this call only, which a "
        "resumed run does not keep (default: none)",
        above=0,
    )
    max_cpu_minutes: float | None = option(
        None,
        "the same limit in CPU time of this process (all threads): a budget that other jobs "
        "on a shared machine do not eat into (default: none)",
        above=0,
    )

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> TrainConfig:
        """A config from saved field values (a run's `config.json`); unknown keys are ignored.

        A `config.json` written when the built-in families' options were fields of their own
        (top-level keys, no `options`) is read as it would be written now: the keys that are
        options of its family and not None become `options` (the others take their defaults);
        the keys its family does not take are dropped.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in fields.items() if k in known}
        if values.get("options") is None:
            values["options"] = _top_level_options(fields)
        return cls(**values)

    def family(self) -> ModelFamily:
        """The model family `model` names, loading `model_file` first when it is given and
        `model` is not known yet (a `ConfigError` for an unknown name)."""
        from keras_attn.models.families import MODEL_FAMILIES, get_family, load_model_file

        if self.model_file and self.model not in MODEL_FAMILIES:
            load_model_file(self.model_file)
        return get_family(self.model)

    def validate(self, family: ModelFamily | None = None) -> None:
        """Raise a `ConfigError` naming the fields at fault if the run cannot start.

        Args:
            family: `self.family()`, when the caller has looked it up already.
        """
        family = family or self.family()
        if any(getattr(self, name) is None for name in TUNING):  # checked as the run takes them
            with_family_tuning(self, family).validate(family)
            return
        check_policy_name(self.mixed_precision)
        hints = typing.get_type_hints(TrainConfig)
        for field in dataclasses.fields(self):  # each value against its field's metadata
            kind = option_kind(hints[field.name])
            if kind is not None:
                check_option(field.name, getattr(self, field.name), kind, field.metadata)
        family.option_values(self.options)  # each option, then the options together
        if self.eval_every and not self.eval_sentences:
            raise ConfigError(
                f"eval_every={self.eval_every} needs dev sentences to evaluate, got "
                "eval_sentences=0",
                ["eval_every", "eval_sentences"],
            )
        if self.schedule == "inverse-sqrt" and self.warmup_steps < 1:
            raise ConfigError(
                f"warmup_steps must be >= 1 with schedule={self.schedule!r}, "
                f"got {self.warmup_steps}",
                ["warmup_steps", "schedule"],
            )
        halving = ("decay_start", "decay_every", "schedule")
        if self.schedule == "halving":
            if self.decay_start is None or self.decay_every is None:
                raise ConfigError("schedule='halving' needs decay_start and decay_every", halving)
            if self.decay_start < 0 or self.decay_every < 1:
                raise ConfigError(
                    f"decay_start must be >= 0 and decay_every >= 1, got {self.decay_start} "
                    f"and {self.decay_every}",
                    halving,
                )
        elif (self.decay_start, self.decay_every) != (None, None):
            raise ConfigError(
                "decay_start and decay_every apply to schedule='halving' only, not "
                f"{self.schedule}",
                halving,
            )
        for name in TASK_ONLY_OPTIONS:
            if getattr(self, name) is not None and name not in TASK_OPTIONS.get(family.task, ()):
                raise ConfigError(
                    f"{name} does not apply to model={self.model!r} (a {family.task} model)",
                    [name, "model"],
                )
        self._validate_scheduled_sampling(family)
        if self.init_from and self.vocab_from:
            raise ConfigError(
                "init_from already gives the run its vocabularies: drop vocab_from",
                ["init_from", "vocab_from"],
            )
        if self.encoder_learning_rate is not None and not family.encoder_layers:
            raise ConfigError(
                f"encoder_learning_rate needs a model with a separate encoder (bertsum), not "
                f"model={self.model!r}",
                ["encoder_learning_rate", "model"],
            )
        if self.encoder_warmup_steps is not None and self.encoder_learning_rate is None:
            raise ConfigError(
                "encoder_warmup_steps applies with encoder_learning_rate only",
                ["encoder_warmup_steps", "encoder_learning_rate"],
            )

    def _validate_scheduled_sampling(self, family: ModelFamily) -> None:
        """Refuse sampling options without a schedule, a bad schedule, or for a family whose step
        view does not declare `supports_scheduled_sampling`."""
        from keras_attn.training.scheduled_sampling import (
            check_schedule,
            supports_scheduled_sampling,
        )

        fields = ["scheduled_sampling", "sampling_constant", "sampling_floor"]
        if self.scheduled_sampling is None:
            for name in fields[1:]:
                if getattr(self, name) is not None:
                    raise ConfigError(f"{name} needs scheduled_sampling", [name, fields[0]])
            return
        if not supports_scheduled_sampling(family):
            raise ConfigError(
                f"scheduled_sampling={self.scheduled_sampling!r} applies to the RNN translators "
                f"(rnn-plain, rnn-attention, rnn-luong), not model={self.model!r}",
                [fields[0], "model"],
            )
        try:
            check_schedule(self.scheduled_sampling, self.sampling_constant, self.sampling_floor)
        except ValueError as error:
            raise ConfigError(str(error), fields) from error

    def model_hyperparameters(self, family: ModelFamily | None = None) -> dict:
        """The family builder's keyword arguments: `options` with the defaults filled in
        (`Family.option_values`, which checks them)."""
        return (family or self.family()).option_values(self.options)


def _top_level_options(fields: dict[str, Any]) -> dict[str, Any] | None:
    """The options of a `config.json` that saved them as top-level keys, defaults filled in:
    the keys that are options of its built-in family and not None (None: no such family)."""
    from keras_attn.models.family_options import BUILT_IN_OPTIONS

    options = BUILT_IN_OPTIONS.get(fields.get("model", "rnn-attention"))
    if options is None:
        return None
    return {
        field.name: field.default if fields.get(field.name) is None else fields[field.name]
        for field in dataclasses.fields(options)
    }


# TrainConfig fields whose value, when None, is the model family's (`Family.training_defaults`).
TUNING = ("learning_rate", "warmup_steps", "schedule")


def with_family_tuning(config: TrainConfig, family: ModelFamily) -> TrainConfig:
    """`config` with the family's `learning_rate`, `warmup_steps` and `schedule` in place of
    those that are None (not given): the config a new run starts with and saves.

    Args:
        config: a new run's config.
        family: its model family.
    """
    defaults = family.training_defaults()
    return dataclasses.replace(
        config, **{name: defaults[name] for name in TUNING if getattr(config, name) is None}
    )


# The TrainConfig fields that only some training tasks read, by task (`ModelFamily.task`).
TASK_OPTIONS = {
    "classification": ("examples_per_class",),  # a tagger's sentences have no one class
    "masked_lm": ("side", "mask_rate"),
    "denoising": ("side", "mask_rate", "noises"),
}
TASK_ONLY_OPTIONS = tuple(dict.fromkeys(name for names in TASK_OPTIONS.values() for name in names))

# TrainConfig fields a resumed run may change: the step target and the checkpoint and evaluation
# settings (none changes what a step computes), and the time limits.
RESUMABLE = (
    "steps",
    "checkpoint_every",
    "eval_sentences",
    "eval_every",
    "max_minutes",
    "max_cpu_minutes",
)

# The time limits belong to one call of `train`: a resumed run does not keep them.
CALL_LIMITS = ("max_minutes", "max_cpu_minutes")


def resumed_config(saved: TrainConfig, config: TrainConfig | None, where: str) -> TrainConfig:
    """The config a run resumes with: `saved` (its `config.json`), changed as `config` asks.

    `config` None keeps `saved` as it is, without its time limits. Otherwise the fields of
    `RESUMABLE` are `config`'s, and every other field of `config` must equal `saved`'s or be
    None, which keeps the saved value: a resumed run continues the training `saved` describes.
    The `options` of `config` are compared one by one: each must equal the saved one (the
    config that started a run with `init_from`, which gave only some options and took the
    others from the other run, resumes it).

    Args:
        saved: the run's saved config.
        config: the config the caller asks for, or None.
        where: the run directory, for the error message.

    Raises:
        ConfigError: naming the fields of `config` that differ from `saved` but cannot change.
    """
    if config is None:
        return dataclasses.replace(saved, **dict.fromkeys(CALL_LIMITS))
    names = [field.name for field in dataclasses.fields(TrainConfig) if field.name != "options"]
    differing = {
        name: (getattr(config, name), getattr(saved, name))
        for name in names
        if name not in RESUMABLE and getattr(config, name) not in (None, getattr(saved, name))
    }
    asked_options, saved_options = config.options or {}, saved.options or {}
    for name in sorted(asked_options):  # a family's options, by name
        if asked_options[name] != saved_options.get(name):
            differing[name] = (asked_options[name], saved_options.get(name))
    if differing:
        asked = ", ".join(f"{name}={value!r}" for name, (value, _) in differing.items())
        kept = ", ".join(f"{name}={value!r}" for name, (_, value) in differing.items())
        raise ConfigError(
            f"cannot resume {where} with {asked}: its config.json has {kept}; resuming may "
            f"change {', '.join(RESUMABLE[:-1])} and {RESUMABLE[-1]} only",
            [*differing, *RESUMABLE],
        )
    return dataclasses.replace(saved, **{name: getattr(config, name) for name in RESUMABLE})
