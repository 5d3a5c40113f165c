"""Exceptions for mistakes in what a caller asked for, as opposed to bugs.

`ConfigError` is raised by the library for a value it cannot use. Its message speaks in the
terms of the Python API (parameter and field names, e.g. `d_model=130 is not divisible by
num_heads=4`) and `fields` records the parameters at fault, so that a command line can report
the same mistake in terms of its own flags (`--d-model 130 is not divisible by --num-heads 4`)
with `ConfigError.in_terms_of`. `UserError` is a mistake that only exists on the command line
(a malformed `--server` address, say) and is reported as it is. Every other exception is a bug
and keeps its traceback.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable


class UserError(Exception):
    """A mistake in a command line: reported as one line, exit status 2."""


class ConfigError(ValueError):
    """A value passed to keras_attn cannot be used.

    Args:
        message: what is wrong, naming the parameters as the Python API does (`name` or
            `name=value`, a string value quoted).
        fields: the parameter names the message refers to.
    """

    def __init__(self, message: str, fields: Iterable[str] = ()):
        super().__init__(message)
        self.fields = tuple(fields)

    def in_terms_of(self, flags: Callable[[str], str | None]) -> str:
        """The message with each recorded field written as its flag.

        `name=value` becomes `FLAG value` (quotes dropped) and a bare `name` becomes `FLAG`, for
        each field in `fields` that `flags` maps to a flag (e.g. `"d_model"` -> `"--d-model"`;
        None leaves the name as it is); other text is left as it is.

        Example:

        >>> message = "d_model=30 is not divisible by num_heads=4"
        >>> error = ConfigError(message, ["d_model", "num_heads"])
        >>> error.in_terms_of(lambda name: "--" + name.replace("_", "-"))
        '--d-model 30 is not divisible by --num-heads 4'
        """
        message = str(self)
        for field in sorted(self.fields, key=len, reverse=True):
            flag = flags(field)
            if flag is None:
                continue
            # Not inside a longer name, a flag or a path (`runs/out/1` keeps its `out`).
            pattern = rf"(?<![\w./-]){re.escape(field)}(?:=(?:'([^']*)'|([^\s,;)]+)))?(?![\w/-])"

            def as_flag(match: re.Match, flag: str = flag) -> str:
                value = match.group(1) if match.group(1) is not None else match.group(2)
                return flag if value is None else f"{flag} {value}"

            message = re.sub(pattern, as_flag, message)
        return message


class PathExistsError(ConfigError, FileExistsError):
    """A path argument names something that exists and must not be overwritten."""


class PathNotFoundError(ConfigError, FileNotFoundError):
    """A path argument names something that does not exist, or lacks a file it needs."""


class PathNotADirectoryError(ConfigError, NotADirectoryError):
    """A path argument that must be a directory is a file, or lies under one."""
