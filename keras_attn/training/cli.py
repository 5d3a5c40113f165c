"""`keras-attn train`: its flags are the fields of `TrainConfig`.

Building the parser imports neither TensorFlow nor Keras, and `run_train` checks the
directories it is given (`--out`, `--init-from`, `--vocab-from`, the run `--resume` continues)
before it loads them, so a mistake in a flag or a path is reported at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from typing import Any

from keras_attn.formats import RunDirectory
from keras_attn.training import paths
from keras_attn.training.config import CALL_LIMITS, RESUMABLE, TrainConfig, resumed_config

# `keras_attn.training.strategy.STRATEGIES`, which imports TensorFlow.
STRATEGIES = ("none", "mirrored", "multiworker")

# The namespace attribute listing the `TrainConfig` fields whose flags the command line gave.
GIVEN = "given"


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
    parser.set_defaults(**{GIVEN: ()})


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
        "checkpoints and TensorBoard logs, and prints dev BLEU (perplexity for gpt) at the end.",
    )
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
    refused here, as `train` would refuse it. Imports no TensorFlow.

    The workers of `--distribute multiworker` share `out`, which only the chief judges (in
    `train`): another worker may find the run the chief has started there already.
    """
    names = [field.name for field in dataclasses.fields(TrainConfig)]
    if args.distribute == "multiworker":
        found = paths.RESUMABLE if args.resume and RunDirectory(args.out).exists() else paths.NEW
    else:
        found = paths.check_out(args.out, args.resume)
    if found == paths.RESUMABLE:
        saved = TrainConfig.from_fields(RunDirectory(args.out).read_config_fields())
        given = {name: getattr(args, name) for name in getattr(args, GIVEN, ())}
        changes = {**dict.fromkeys(CALL_LIMITS), **given}
        config = dataclasses.replace(saved, **changes)
        resumed_config(saved, config, args.out)
        return config
    config = TrainConfig(**{name: getattr(args, name) for name in names})
    for field in ("init_from", "vocab_from"):
        if getattr(config, field):
            paths.check_origin(getattr(config, field), field)
    return config


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
