"""`keras-attn train`: its flags are the fields of `TrainConfig` (the run's options) and the
fields of the chosen model family's options dataclass (`--units`, `--d-model`, ...).

Building the parser imports neither TensorFlow nor Keras, and `run_train` checks the
directories it is given (`--out`, `--init-from`, `--vocab-from`, the run `--resume` continues)
before it loads them, so a mistake in a flag or a path is reported at once.

`--model`, `--model-file`, `--out` and `--resume` are read before the rest of the command line,
to choose the family whose options become flags (`attention_units` -> `--attention-units`):
`--model` (default: rnn-attention), or the model of the run `--resume` continues. A built-in
family's options are read from `keras_attn.models.family_options` without importing the
families; `--model-file FILE` is imported (it registers model families with
`keras_attn.models.register_family`), and resuming a run that has a `model_file.py` imports
that copy instead.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import typing
from pathlib import Path
from typing import Any

from keras_attn.errors import ConfigError, UserError
from keras_attn.formats import CONFIG_FILE, MODEL_SOURCE, RunDirectory
from keras_attn.options import describe_range
from keras_attn.training import paths
from keras_attn.training.config import CALL_LIMITS, RESUMABLE, TrainConfig, resumed_config

# `keras_attn.training.strategy.STRATEGIES`, which imports TensorFlow.
STRATEGIES = ("none", "mirrored", "multiworker")

# The namespace attribute listing the `TrainConfig` fields whose flags the command line gave.
GIVEN = "given"
# The namespace attribute naming the options of the chosen family (None: an unknown family,
# refused when the run starts), and the prefix of each option's attribute.
FAMILY_OPTIONS = "family_options"
# The namespace attribute holding the `ConfigError` for a flag of another family's option.
REFUSED = "refused"
OPTION = "options."
# The arguments of `train` besides the `TrainConfig` fields.
COMMAND_ARGUMENTS = ("distribute", "out", "resume", "quiet", "help", "verbose")


def flag(name: str) -> str:
    """The flag of a `TrainConfig` field (or `train` argument): `batch_size` -> `--batch-size`."""
    return "--" + name.replace("_", "-")


def _given(namespace: argparse.Namespace, dest: str) -> None:
    setattr(namespace, GIVEN, (*getattr(namespace, GIVEN, ()), dest))


class _Store(argparse.Action):
    """Store the (converted, checked) value and record that the flag was given."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, values)
        _given(namespace, self.dest)


class _Switch(argparse.BooleanOptionalAction):
    """`--name` / `--no-name`, recording that the flag was given."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        super().__call__(parser, namespace, values, option_string)
        _given(namespace, self.dest)


def _help(text: str | None, default: Any, flags: dict[str, str]) -> str | None:
    """A field's help with its flags filled in and its default said, unless the text says it."""
    if text is None:
        return None
    text = text.format(**flags)
    if default is not None and "default" not in text:
        text += f" (default: {default})"
    return text


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per `TrainConfig` field, with the field's default, choices and help.

    The namespace's `given` attribute lists the fields whose flags were given.
    """
    hints = typing.get_type_hints(TrainConfig)
    flags = {field.name: flag(field.name) for field in dataclasses.fields(TrainConfig)}
    for field in dataclasses.fields(TrainConfig):
        if not field.metadata["flag"]:
            continue
        kinds = typing.get_args(hints[field.name]) or (hints[field.name],)
        kwargs = {
            "default": field.default,
            "help": _help(field.metadata["help"], field.default, flags),
            "action": _Store,
        }
        if bool in kinds:
            kwargs["action"] = _Switch
        elif int in kinds or float in kinds:
            kwargs["type"] = int if int in kinds else float
        if field.metadata["choices"] is not None:
            kwargs["choices"] = field.metadata["choices"]
        parser.add_argument(flags[field.name], **kwargs)
    parser.set_defaults(**{GIVEN: (), "options": None, FAMILY_OPTIONS: None, REFUSED: None})


def _family_parser_for(
    parser: argparse.ArgumentParser, args: list[str]
) -> tuple[argparse.ArgumentParser, str | None]:
    """`(a copy of parser with the options of the family args choose as flags, its name)`.

    The family is one of the model file's (`--model-file` in `args`, or with `--resume` the copy
    in the `--out` run), else the one `--model` names, else the resumed run's, else
    `TrainConfig.model`'s default. A mistake ends in `parser.error`.
    """
    early = type(parser)(prog=parser.prog, add_help=False, allow_abbrev=False)
    for name in ("--model-file", "--model", "--out"):
        early.add_argument(name)
    early.add_argument("--resume", action="store_true")
    known, _ = early.parse_known_args(args)
    run = RunDirectory(known.out) if known.resume and known.out else None
    if run is not None and run.file(MODEL_SOURCE).is_file():
        path, saved = run.file(MODEL_SOURCE), run.read_config_fields() if run.exists() else {}
    elif known.model_file:
        path, saved = Path(known.model_file), {}
    else:
        return _registered_family_parser(parser, known.model or _saved_model(run))
    from keras_attn.models.families import load_model_file

    try:
        families = {family.name: family for family in load_model_file(path)}
    except ConfigError as error:
        parser.error(error.in_terms_of(flag))
    name = known.model or saved.get("model")
    if name is None and len(families) > 1:
        parser.error(
            f"--model-file {path} defines the model families {', '.join(families)}: choose one "
            "with --model"
        )
    name = name or next(iter(families))
    if name not in families:
        parser.error(
            f"--model {name} is not a family of --model-file {path} (it defines: "
            f"{', '.join(families)})"
        )
    family = families[name]
    return _family_parser(parser, family.options, name, f"{name} ({path})"), name


def _saved_model(run: RunDirectory | None) -> str | None:
    """The `model` of a run to resume, or None (no run, or a config.json that does not read:
    the resume itself reports that)."""
    if run is None or not run.file(CONFIG_FILE).is_file():
        return None
    try:
        return run.read_config_fields().get("model")
    except UserError:
        return None


def _registered_family_parser(
    parser: argparse.ArgumentParser, name: str | None
) -> tuple[argparse.ArgumentParser, str | None]:
    """`(a copy of parser with the option flags of family name, name)`: a built-in family's
    options are read without importing the families (and Keras); another name is looked up
    among the registered families, and an unknown one gets a copy of `parser` with no option
    flags (the run refuses the name)."""
    from keras_attn.models.family_options import BUILT_IN_OPTIONS

    name = name or TrainConfig.model
    if name in BUILT_IN_OPTIONS:
        return _family_parser(parser, BUILT_IN_OPTIONS[name], name, name), name
    from keras_attn.models.families import MODEL_FAMILIES

    family = MODEL_FAMILIES.get(name)
    if family is None:
        return _copy(parser), name
    return _family_parser(parser, family.options, name, name), name


def _family_parser(
    parser: argparse.ArgumentParser, options: type | None, name: str, label: str
) -> argparse.ArgumentParser:
    """A copy of `parser` whose flags include the fields of `options`, the options dataclass
    of the family `name` (`label` names it in the help and in errors)."""
    from keras_attn.models.family import option_fields

    parser = _copy(parser)
    fields = option_fields(options) if options is not None else {}
    parser.set_defaults(model=name, **{FAMILY_OPTIONS: tuple(fields)})
    group = parser.add_argument_group(
        f"options of model family {label}", "train --model M --help lists those of model M"
    )
    for option, (field, kind) in fields.items():
        if option in COMMAND_ARGUMENTS or option in TrainConfig.__dataclass_fields__:
            parser.error(
                f"option {option} of model family {label} would hide {flag(option)} "
                "of keras-attn train: rename it"
            )
        wanted = describe_range(kind, field.metadata)
        text = field.metadata.get("help") or ""
        said = [wanted] if wanted is not None else []
        if "default" not in text:
            said.append(f"default: {field.default}")
        text = f"{text} ({'; '.join(said)})".strip() if said else text
        kwargs = {
            "dest": OPTION + option,
            "default": field.default,
            "help": text.replace("%", "%%"),  # argparse formats help with %
            "action": _Switch if kind is bool else _Store,
        }
        if kind in (int, float):
            kwargs["type"] = kind
        if field.metadata.get("choices") is not None:
            kwargs["choices"] = field.metadata["choices"]
        elif kind is not bool:
            kwargs["metavar"] = option.upper()
        group.add_argument(flag(option), **kwargs)
    return parser


def _copy(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A copy of `parser` that parses as its class does: the parser may parse other command
    lines (with other families) later."""
    parser = copy.deepcopy(parser)
    vars(parser).pop("parse_known_args", None)
    return parser


def _reading_family_options(parser: argparse.ArgumentParser) -> None:
    """Make `parser` add the chosen family's option flags before it parses, and keep a flag of
    an option that only other families take for the run to refuse (one line, exit status 2)."""

    def parse(args=None, namespace=None):
        arguments = sys.argv[1:] if args is None else list(args)
        family_parser, name = _family_parser_for(parser, arguments)
        namespace, extras = family_parser.parse_known_args(arguments, namespace)
        return namespace, _other_families_options(name, namespace, extras)

    # argparse has no hook before parsing: the subcommand parser's own method is replaced.
    parser.parse_known_args = parse


def _other_families_options(name: str | None, namespace, extras: list[str]) -> list[str]:
    """`extras` without the flags (and their values) of options of other built-in families
    (`--d-model 64` for rnn-attention); `namespace` keeps the `ConfigError` the run reports,
    naming all of them and the options of family `name`. An unknown family (no
    options in `namespace`) keeps every extra: the run refuses its name first."""
    from keras_attn.models.family import option_fields
    from keras_attn.models.family_options import BUILT_IN_OPTIONS

    mine = getattr(namespace, FAMILY_OPTIONS, None)
    if mine is None:
        return extras
    kinds = {
        option: kind
        for options in BUILT_IN_OPTIONS.values()
        for option, (_, kind) in option_fields(options).items()
    }
    left, foreign, arguments = [], [], iter(extras)
    for extra in arguments:
        written = extra.split("=", 1)[0].removeprefix("--").replace("-", "_")
        option = written if written in kinds else written.removeprefix("no_")
        negated = option != written  # --no-NAME: a bool option only
        known = option in kinds and (not negated or kinds[option] is bool)
        if not extra.startswith("--") or not known or option in mine:
            left.append(extra)
            continue
        if kinds[option] is not bool and "=" not in extra:
            next(arguments, None)  # its value
        foreign.append(option)
    if foreign and getattr(namespace, REFUSED, None) is None:
        verb = "does" if len(foreign) == 1 else "do"
        setattr(namespace, REFUSED, ConfigError(
            f"{', '.join(foreign)} {verb} not apply to model={name!r} (its options: "
            f"{', '.join(mine) or 'none'})",
            [*foreign, "model", *mine],
        ))  # fmt: skip
    return left


RESUME_HELP = (
    "continue the run in --out from its last checkpoint, with the options saved in its "
    "config.json: a flag not given keeps the run's value. "
    + ", ".join(flag(name) for name in RESUMABLE if name not in CALL_LIMITS)
    + ", "
    + " and ".join(flag(name) for name in CALL_LIMITS)
    + " (limits of this call only), --quiet and --distribute may change; any other flag must "
    "repeat the run's value"
)


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a model and write a resumable run directory",
        description="Train a model on a corpus; writes RUN/ with the .keras model, vocabularies, "
        "checkpoints and TensorBoard logs, and prints dev BLEU (perplexity for a language "
        "model) at the end. "
        "The options of the model family are flags too: train --help lists those of the "
        "default family, train --model M --help those of model M, and train --model-file FILE "
        "--help those of FILE's family.",
    )
    _reading_family_options(parser)
    add_config_arguments(parser)
    parser.add_argument(
        "--distribute",
        choices=STRATEGIES,
        default="none",
        help="tf.distribute strategy: mirrored = this host's GPUs (or logical CPUs), "
        "multiworker = the hosts in TF_CONFIG; --batch-size is the global batch (default: none)",
    )
    parser.add_argument("--out", required=True, help="run directory")
    parser.add_argument("--resume", action="store_true", help=RESUME_HELP)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_train, flags=flag)


def requested_config(args: argparse.Namespace) -> TrainConfig:
    """The config `args` asks for, after the checks of `out`, `init_from` and `vocab_from`.

    A new run takes every flag's value. A run that `--resume` continues takes its saved config
    with the flags given (and no time limit unless given); a given flag that cannot change is
    refused here, as `train` would refuse it. Imports no TensorFlow (unless `--model-file` did).

    The workers of `--distribute multiworker` share `out`, which only the chief judges (in
    `train`): another worker may find the run the chief has started there already.
    """
    return _requested(args)[0]


def _requested(args: argparse.Namespace) -> tuple[TrainConfig, bool]:
    """`(requested_config(args), whether it resumes a run)`."""
    if getattr(args, REFUSED, None) is not None:
        raise getattr(args, REFUSED)
    fields = [field for field in dataclasses.fields(TrainConfig) if field.metadata["flag"]]
    given_names = getattr(args, GIVEN, ())
    # The options given; the others are the defaults, or with --init-from the other run's
    # (`resolve_init_config`).
    options = {
        name: getattr(args, OPTION + name)
        for name in getattr(args, FAMILY_OPTIONS, None) or ()
        if OPTION + name in given_names
    }
    if args.distribute == "multiworker":
        found = paths.RESUMABLE if args.resume and RunDirectory(args.out).exists() else paths.NEW
    else:
        found = paths.check_out(args.out, args.resume)
    if found == paths.RESUMABLE:
        saved = TrainConfig.from_fields(RunDirectory(args.out).read_config_fields())
        given = {name: getattr(args, name) for name in given_names if not name.startswith(OPTION)}
        changes = {**dict.fromkeys(CALL_LIMITS), **given}
        if options:
            changes["options"] = {**(saved.options or {}), **options}
        config = dataclasses.replace(saved, **changes)
        resumed_config(saved, config, args.out)
        return config, True
    values = {field.name: getattr(args, field.name) for field in fields}
    config = TrainConfig(**values, options=options)
    for field in ("init_from", "vocab_from"):
        if getattr(config, field):
            paths.check_origin(getattr(config, field), field)
    return config, False


def run_train(args: argparse.Namespace) -> int:
    """Exit 0 when the run finished, 1 when it diverged (one line on stderr).

    A configuration error (a bad flag value, an unusable --out, a run whose checkpoints do not
    restore) propagates as a `keras_attn.errors.ConfigError`, which `keras-attn` reports in one
    line with exit status 2.
    """
    config = requested_config(args)
    from keras_attn.training.trainer import TrainingDiverged, train

    try:
        train(
            args.out,
            config,
            resume=args.resume,
            progress=not args.quiet,
            distribute=args.distribute,
        )
    except TrainingDiverged as error:  # not a mistake in the flags: exit 1, as a failed run
        print(f"keras-attn train: error: {error}", file=sys.stderr)
        return 1
    return 0
