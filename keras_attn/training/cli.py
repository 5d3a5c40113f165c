"""`keras-attn train`: its flags are the fields of `TrainConfig`."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from typing import Any

from keras_attn.training.config import TrainConfig
from keras_attn.training.strategy import STRATEGIES


def flag(name: str) -> str:
    """The flag of a `TrainConfig` field (or `train` argument): `batch_size` -> `--batch-size`."""
    return "--" + name.replace("_", "-")


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per `TrainConfig` field, with the field's default, choices and help."""
    hints = typing.get_type_hints(TrainConfig)
    flags = {field.name: flag(field.name) for field in dataclasses.fields(TrainConfig)}
    for field in dataclasses.fields(TrainConfig):
        kinds = typing.get_args(hints[field.name]) or (hints[field.name],)
        help_text = field.metadata["help"]
        kwargs = {
            "default": field.default,
            "help": None if help_text is None else help_text.format(**flags),
        }
        if bool in kinds:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif int in kinds or float in kinds:
            kwargs["type"] = int if int in kinds else float
        if field.metadata["choices"] is not None:
            kwargs["choices"] = field.metadata["choices"]
        parser.add_argument(flags[field.name], **kwargs)


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
        "multiworker = the hosts in TF_CONFIG; --batch-size is the global batch",
    )
    parser.add_argument("--out", required=True, help="run directory")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_train, flags=flag)


def run_train(args: argparse.Namespace) -> int:
    """Exit 0 when the run finished, 1 when it diverged (one line on stderr).

    A configuration error (a bad flag value, an unusable --out, a run whose checkpoints do not
    restore) propagates as a `keras_attn.errors.ConfigError`, which `keras-attn` reports in one
    line with exit status 2.
    """
    from keras_attn.training.trainer import TrainingDiverged, train

    names = {field.name for field in dataclasses.fields(TrainConfig)}
    config = TrainConfig(**{name: value for name, value in vars(args).items() if name in names})
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
