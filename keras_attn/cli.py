"""`keras-attn` command line: train | export | serve | translate.

Each subcommand's parser lives beside the code it drives (`training/cli.py`, `export/cli.py`,
`serving/cli.py`); this module only dispatches. Building the parser imports no TensorFlow, so a
mistake in a flag or a path is reported at once. A mistake in what the user asked for (an
argparse error, `keras_attn.errors.ConfigError` reported with the subcommand's flag names, or
`keras_attn.errors.UserError`) ends with one line on stderr and exit status 2; any other
exception is a bug and keeps its traceback.

The command prints only its own words: unless asked to be verbose, TensorFlow's start-up
logging (written by its C++ code straight to file descriptor 2 while `tensorflow` is imported
and its devices are listed) is dropped, and so are absl's warnings while the command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from typing import NoReturn

from keras_attn.errors import ConfigError, UserError

__all__ = ["VERBOSE_ENV", "UserError", "build_parser", "main"]

VERBOSE_ENV = "KERAS_ATTN_VERBOSE"
# Defaults while quiet: TensorFlow's C++ logging below FATAL stays off.
_QUIET_ENVIRON = {"TF_CPP_MIN_LOG_LEVEL": "3"}

_DESCRIPTION = (
    "Train, export, serve and query keras_attn sequence models. TensorFlow's start-up logging "
    f"and warnings are kept off stderr; --verbose (before or after the command) or {VERBOSE_ENV}=1 "
    "in the environment lets all of it through."
)
_VERBOSE_HELP = f"let TensorFlow's start-up logging through (also: {VERBOSE_ENV}=1)"


class _Parser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors are one line, `PROG: error: MESSAGE`, and exit 2; an
    argument no subcommand knows is reported by that subcommand (`keras-attn export: error:`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}  # subcommand name -> its parser

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_args(self, args=None, namespace=None):
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            parser = self.commands.get(getattr(parsed, "command", None), self)
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        return parsed


def build_parser() -> argparse.ArgumentParser:
    """The `keras-attn` parser; building it imports no TensorFlow or Keras."""
    from keras_attn.export import cli as export_cli
    from keras_attn.serving import cli as serving_cli
    from keras_attn.training import cli as training_cli

    parser = _Parser(prog="keras-attn", description=_DESCRIPTION)
    # SUPPRESS: `verbose` is in the namespace only when asked for, at either level.
    parser.add_argument(
        "--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE_HELP
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    training_cli.add_parsers(subparsers)
    export_cli.add_parsers(subparsers)
    serving_cli.add_parsers(subparsers)
    parser.commands = subparsers.choices
    for subparser in subparsers.choices.values():
        subparser.add_argument(
            "--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE_HELP
        )
    return parser


def _verbose_by_environment() -> bool:
    return os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


@contextlib.contextmanager
def _stderr_dropped() -> Iterator[None]:
    """File descriptor 2 (where C++ code writes directly) goes to a temporary file meanwhile; if
    the block raises, what it wrote is passed on to stderr before the exception goes on."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to keep quiet
        yield
        return
    with tempfile.TemporaryFile() as dropped:
        os.dup2(dropped.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            dropped.seek(0)
            for chunk in iter(lambda: dropped.read(1 << 16), b""):
                os.write(2, chunk)
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


class _QuietLoader(importlib.abc.Loader):
    """Runs TensorFlow's real loader with stderr dropped and Python warnings ignored, then lists
    the devices (CUDA's start-up logging) before stderr comes back."""

    def __init__(self, loader: importlib.abc.Loader, quiet: _Quiet):
        self.loader = loader
        self.quiet = quiet

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # the real one from now on
        with _stderr_dropped(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.loader.exec_module(module)
            module.config.list_physical_devices()
        self.quiet.quiet_absl()


class _Quiet(importlib.abc.MetaPathFinder):
    """While installed: TensorFlow's C++ logging defaults to off (`TF_CPP_MIN_LOG_LEVEL`), its
    first import runs through `_QuietLoader`, and once it is imported absl's Python logging shows
    errors only. `close()` undoes all of it."""

    def __init__(self) -> None:
        self._environ = {name: os.environ.get(name) for name in _QUIET_ENVIRON}
        for name, value in _QUIET_ENVIRON.items():
            os.environ.setdefault(name, value)
        self._absl_verbosity: int | None = None
        sys.meta_path.insert(0, self)
        if "tensorflow" in sys.modules:
            self.quiet_absl()

    def find_spec(self, name, path, target=None):
        if name != "tensorflow":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if hasattr(spec.loader, "exec_module"):
                    spec.loader = _QuietLoader(spec.loader, self)
                return spec
        return None

    def quiet_absl(self) -> None:
        if self._absl_verbosity is None:
            from absl import logging as absl_logging

            self._absl_verbosity = absl_logging.get_verbosity()
            absl_logging.set_verbosity(absl_logging.ERROR)

    def close(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for name, value in self._environ.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self._absl_verbosity is not None:
            from absl import logging as absl_logging

            absl_logging.set_verbosity(self._absl_verbosity)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs `keras-attn ARGV`; returns the exit status (2: a mistake in what was asked for)."""
    quiet = None if _verbose_by_environment() else _Quiet()
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "verbose", False) and quiet is not None:
            quiet.close()
            quiet = None
        return _run(args)
    finally:
        if quiet is not None:
            quiet.close()


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except ConfigError as error:
        flags = getattr(args, "flags", lambda name: None)
        print(f"keras-attn {args.command}: error: {error.in_terms_of(flags)}", file=sys.stderr)
        return 2
    except UserError as error:
        print(f"keras-attn {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"keras-attn {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
