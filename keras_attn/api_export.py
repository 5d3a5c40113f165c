"""One decorator that both exports a public symbol and registers it for Keras serialization."""

from __future__ import annotations

from typing import TypeVar

PACKAGE = "keras_attn"

T = TypeVar("T")


def keras_attn_export(path: str | list[str]):
    """Mark `symbol` as public under `path` and register it under package `keras_attn`.

    Classes with a `get_config()` (layers, scores, …) are registered for serialization; plain
    functions and helper classes are only marked as public.

    Registration makes `keras.saving.deserialize_keras_object` (and so `.keras` loading) find the
    class as `keras_attn>ClassName` without `custom_objects`. `path` is kept on the symbol as
    `_keras_attn_api` so the public namespaces can be checked against what is exported.

    This module imports Keras only to register a class, so a module that exports no Keras class
    (`keras_attn.models.family`) imports neither Keras nor TensorFlow.

    Example:

    >>> import keras
    >>> @keras_attn_export("keras_attn.layers.Thing")
    ... class Thing(keras.layers.Layer):
    ...     pass
    >>> keras.saving.get_registered_name(Thing)
    'keras_attn>Thing'
    """
    paths = [path] if isinstance(path, str) else list(path)

    def decorator(symbol: T) -> T:
        symbol._keras_attn_api = tuple(paths)
        if isinstance(symbol, type) and hasattr(symbol, "get_config"):
            import keras

            keras.saving.register_keras_serializable(package=PACKAGE)(symbol)
        return symbol

    return decorator
