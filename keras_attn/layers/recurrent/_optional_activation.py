"""An activation argument where None means "no activation" (kept as None in the config)."""

from __future__ import annotations

from collections.abc import Callable

import keras


def get_optional_activation(activation) -> Callable | None:
    """None for None, `keras.activations.get(activation)` otherwise."""
    return None if activation is None else keras.activations.get(activation)
