"""Helpers on layer outputs and configuration values, shared by the checks of the harness.

Outputs are nested structures (tuples, lists, dicts) of tensors; `flat` lists their tensors in
Keras's order and `describe` gives their nesting. Configuration values are compared as JSON-like
values (`is_plain`, `plain_equal`) or, for Keras objects, through their serialized form
(`equivalent`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import keras
import numpy as np


def flat(structure: Any) -> list:
    """The tensors of a nested output structure, in Keras's order."""
    return list(keras.tree.flatten(structure))


def to_numpy(x: Any) -> np.ndarray:
    """A tensor (or array) as a NumPy array."""
    return np.asarray(keras.ops.convert_to_numpy(x))


def dtype_name(x: Any) -> str:
    """The standardized dtype name of a tensor (`"float32"`, `"int64"`, ...)."""
    return keras.backend.standardize_dtype(x.dtype)


def is_float(x: Any) -> bool:
    """Whether a tensor has a floating-point dtype."""
    return keras.backend.is_float_dtype(dtype_name(x))


def describe(structure: Any) -> Any:
    """Nesting of `structure` with tuples and lists alike and leaves replaced by None."""
    if isinstance(structure, (list, tuple)):
        return [describe(x) for x in structure]
    if isinstance(structure, Mapping):
        return {key: describe(value) for key, value in structure.items()}
    return None


def shapes_compatible(a: Any, b: Any) -> bool:
    """Whether two shapes have the same rank and agree wherever both sizes are known."""
    a, b = tuple(a), tuple(b)
    return len(a) == len(b) and all(
        x is None or y is None or x == y for x, y in zip(a, b, strict=True)
    )


def json_normalise(value: Any) -> Any:
    """`value` after a JSON round trip (tuples become lists); `TypeError` if not JSON-able."""
    return json.loads(json.dumps(value))


def is_plain(value: Any) -> bool:
    """JSON-like values: None, bools, numbers, strings and lists/tuples/dicts of them."""
    if value is None or isinstance(value, (bool, int, float, str, np.generic)):
        return True
    if isinstance(value, (list, tuple)):
        return all(is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_plain(v) for k, v in value.items())
    return False


def plain_equal(a: Any, b: Any) -> bool:
    """Equality of JSON-like values with tuples and lists alike and bools kept apart from ints."""
    a = a.item() if isinstance(a, np.generic) else a
    b = b.item() if isinstance(b, np.generic) else b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(plain_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(plain_equal(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def equivalent(given: Any, stored: Any) -> bool:
    """Whether `stored` (an attribute or config value) faithfully keeps the argument `given`.

    Plain values must be equal (tuples and lists alike). A plain `given` (an identifier such as
    `"dot"` or `"glorot_uniform"`) may be stored resolved, as an object or its serialized dict. A
    Keras object `given` must serialize like `stored`.
    """
    if is_plain(given):
        if is_plain(stored) and not (isinstance(given, str) and isinstance(stored, dict)):
            return plain_equal(given, stored)
        return stored is not None
    try:
        given_serialized = keras.saving.serialize_keras_object(given)
        stored_serialized = keras.saving.serialize_keras_object(stored)
        return json_normalise(given_serialized) == json_normalise(stored_serialized)
    except (TypeError, ValueError):
        return given is stored
