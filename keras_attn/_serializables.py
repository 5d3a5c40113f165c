"""Registering keras_attn's Keras objects before Keras reads a saved model.

`keras.saving.load_model` finds a class saved as `keras_attn>Name` only once the module that
defines it has been imported: Keras imports the modules of its own packages, not ours. `import
keras_attn` imports no subpackage (so that the `keras-attn` command checks its arguments before
Keras and TensorFlow load), so `register()` imports every subpackage that defines such objects
(and the modules of `keras_attn.models`, whose package imports its names lazily):
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

# Modules of the lazy `keras_attn.models` that import every model module defining such objects.
MODEL_MODULES = ("keras_attn.models.families",)

_finished: set[str] = set()


def imported(name: str) -> None:
    """Called by each of `SUBPACKAGES` as the last line of its module; registers once Keras is
    imported (a lazy subpackage, imported before Keras, leaves it to Keras' import)."""
    _finished.add(name)
    if "keras" in sys.modules:
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
    if not _importing("keras_attn.models."):
        for name in MODEL_MODULES:
            importlib.import_module(name)


def _importing(prefix: str) -> bool:
    """Whether a module whose name starts with `prefix` is being imported now (Keras was first
    imported by it: importing the model modules now could meet it half built; each model
    module registers its own objects as it is imported, and the rest when the families are)."""
    return any(
        getattr(getattr(module, "__spec__", None), "_initializing", False)
        for name, module in list(sys.modules.items())
        if name.startswith(prefix)
    )
