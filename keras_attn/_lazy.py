"""A package's public names, imported the first time they are used (PEP 562)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_names(package: str, names: dict[str, str]) -> tuple[Callable, Callable]:
    """`(__getattr__, __dir__)` for `package`, whose public name N is the attribute N of the
    module `names[N]`, imported when N is first asked for."""

    def __getattr__(name: str):
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
