"""The options dataclass of each built-in model family, by the family's name.

`keras-attn train` builds a built-in family's flags from this table, and a run directory written
before the families had options dataclasses is read with it, without importing the families
(and Keras with them). Each family folder's `options.py` (which imports neither TensorFlow nor
Keras) declares its families in a `FAMILY_OPTIONS` table, and this module gathers them: a new
family adds its options to its own folder only. A test checks the result against
`keras_attn.models.families.MODEL_FAMILIES`.
"""

from __future__ import annotations

import importlib
import importlib.util
import operator
import pkgutil
from pathlib import Path


def _collect() -> dict[str, type]:
    """Every `FAMILY_OPTIONS` table of an `options` module in a folder of `keras_attn.models`."""
    table: dict[str, type] = {}
    folders = pkgutil.iter_modules([str(Path(__file__).parent)])
    for folder in sorted(folders, key=operator.attrgetter("name")):
        name = f"{__package__}.{folder.name}.options"
        if folder.ispkg and importlib.util.find_spec(name) is not None:
            table.update(importlib.import_module(name).FAMILY_OPTIONS)
    return table


BUILT_IN_OPTIONS: dict[str, type] = _collect()
