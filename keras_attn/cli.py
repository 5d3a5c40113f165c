"""`keras-attn` command line: train | export | serve | translate.

Each subcommand's parser lives beside the code it drives (`training/cli.py`, `export/cli.py`,
`serving/cli.py`); this module only dispatches. A user mistake ends with one line on stderr and a
non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys


class UserError(Exception):
    """A mistake in what the user asked for: reported as one line, exit status 2."""


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
    except UserError as error:
        print(f"keras-attn {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"keras-attn {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # `python -m keras_attn.cli` runs this file as `__main__`; dispatch through the imported
    # module, so the subcommands' `keras_attn.cli.UserError` is the class caught above.
    from keras_attn.cli import main as package_main

    sys.exit(package_main())
