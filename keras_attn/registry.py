"""Resolve "by name or instance" arguments (scores, distributions, …) and serialize them back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import keras


def resolve(identifier: Any, table: Mapping[str, type], base: type, kind: str, **kwargs):
    """Return the object an argument such as `score="general"` stands for.

    Args:
        identifier: a name in `table` (a new object is built with `**kwargs`), an instance of
            `base` (returned as is), or a serialized config dict.
        table: name → class.
        base: the base class instances must have.
        kind: the argument's name, for the error message (`"score"`).

    Raises:
        ValueError: quoting the value and the accepted names.
    """
    if isinstance(identifier, base):
        return identifier
    if isinstance(identifier, dict):
        return keras.saving.deserialize_keras_object(identifier)
    if isinstance(identifier, str) and identifier in table:
        return table[identifier](**kwargs)
    public = getattr(base, "_keras_attn_api", (f"{base.__module__}.{base.__name__}",))[0]
    raise ValueError(
        f"Expected {kind} in {sorted(table)} or a {public}. Received: {kind}={identifier!r}"
    )


def serialize(spec: Any) -> str | dict:
    """A spec for `get_config()`: names stay names, objects become config dicts."""
    return spec if isinstance(spec, str) else keras.saving.serialize_keras_object(spec)
