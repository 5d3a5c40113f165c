"""`keras-attn` command line: train | export | serve | translate.

Each subcommand's parser lives beside the code it drives (`training/cli.py`, `export/cli.py`,
`serving/cli.py`); this module only dispatches. A mistake in what the user asked for
(`keras_attn.errors.ConfigError`, reported with the subcommand's flag names, or
`keras_attn.errors.UserError`) ends with one line on stderr and exit status 2; any other
exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from keras_attn.errors import ConfigError, UserError

__all__ = ["UserError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from keras_attn.export import cli as export_cli
    from keras_attn.serving import cli as serving_cli
    from keras_attn.training import cli as training_cli

    parser = argparse.ArgumentParser(
        prog="keras-attn",
        description="Train, export, serve and query keras_attn sequence models.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    training_cli.add_parsers(subparsers)
    export_cli.add_parsers(subparsers)
    serving_cli.add_parsers(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
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
