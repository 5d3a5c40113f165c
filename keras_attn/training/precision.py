"""Mixed-precision policy selection."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_attn.errors import ConfigError

POLICIES = ("auto", "float32", "mixed_float16", "mixed_bfloat16")


def resolve_policy(name: str) -> str:
    """`auto` → `mixed_float16` when a GPU is visible, else `float32`; other names unchanged.

    Raises:
        keras_attn.errors.ConfigError: for a name outside `POLICIES`.
    """
    if name not in POLICIES:
        raise ConfigError(
            f"Expected mixed_precision in {list(POLICIES)}. Received: {name!r}",
            ["mixed_precision"],
        )
    if name == "auto":
        return "mixed_float16" if tf.config.list_physical_devices("GPU") else "float32"
    return name


def set_policy(name: str) -> str:
    """Resolve `name` and make it the global Keras dtype policy; returns the resolved name."""
    resolved = resolve_policy(name)
    keras.config.set_dtype_policy(resolved)
    return resolved
