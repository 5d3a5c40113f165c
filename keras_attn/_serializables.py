"""Registering keras_attn's Keras objects before Keras reads a saved model.

`keras.saving.load_model` finds a class saved as `keras_attn>Name` only once the module that
defines it has been imported: Keras imports the modules of its own packages, not ours. `import
keras_attn` imports no subpackage (so that the `keras-attn` command checks its arguments before
Keras and TensorFlow load), so `register()` imports every subpackage that defines such objects:
`keras_attn` calls it as soon as Keras is imported, and each of those subpackages calls it
(through `imported`) when it has finished importing. Whichever way a program starts — `import
keras_attn` then Keras, Keras first, or one subpackage — every keras_attn object is registered
by the time Keras can read a model.
"""

from __future__ import annotations

import importlib
import sys

# In dependency order: each imports only keras_attn modules before it (or none).
SUBPACKAGES = (
    "keras_attn.ops",
    "keras_attn.distributions",
    "keras_attn.scores",
    "keras_attn.layers",
    "keras_attn.decoding",
    "keras_attn.models",
    "keras_attn.vision",
    "keras_attn.training.schedules",
)

_finished: set[str] = set()


def imported(name: str) -> None:
    """Called by each of `SUBPACKAGES` as the last line of its module."""
    _finished.add(name)
    register()


def register(*_: object) -> None:
    """Import every subpackage of `SUBPACKAGES` (at once, or once the ones importing now finish).

    A subpackage in `sys.modules` that has not called `imported` is still being imported (one
    whose import failed is gone from `sys.modules`): importing the others now could meet it half
    built, so registration waits for it to call `imported`.
    """
    if any(name in sys.modules and name not in _finished for name in SUBPACKAGES):
        return
    for name in SUBPACKAGES:
        importlib.import_module(name)
