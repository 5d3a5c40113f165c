"""Options declared as dataclass fields: the field metadata is the help text, the choices and the
range of each, and `check_option` checks a value against it.

Both kinds of option are declared this way: a training run's (`keras_attn.training.config
.TrainConfig`) and a model family's (`keras_attn.models.Family.options`), so `keras-attn train`
takes its flags and its checks from the one declaration. This module imports neither TensorFlow
nor Keras (the command line reads it before either is loaded).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

from keras_attn.errors import ConfigError

# The metadata keys an option field may have: its help text; the values it may take; its range,
# `min` <= value (or `above` < value) and value <= `max` (or value < `below`); `float32`: at most
# the largest float32, for a value applied in float32.
OPTION_METADATA = ("help", "choices", "min", "above", "max", "below", "float32")
# The types an option's value may have (or None).
OPTION_TYPES = (bool, int, float, str)

FLOAT32_MAX = float(2**128 - 2**104)  # the largest finite float32, about 3.403e38


def option_field(default: Any, help: str, **metadata: Any) -> Any:
    """A field of an options dataclass: its default, its help text and the rest of its metadata
    (`choices`, a range, `float32`; see `OPTION_METADATA`)."""
    return dataclasses.field(default=default, metadata={"help": help, **metadata})


def describe_range(kind: type, metadata: Any) -> str | None:
    """What `check_option` asks of a value in words ("positive", "in [0, 1)", ">= 2", "a finite
    number >= 0"), or None for an option without a range."""
    low = metadata.get("min", metadata.get("above"))
    high = metadata.get("max", metadata.get("below"))
    if low is None and high is None:
        return None
    if low is not None and high is not None:
        if "min" in metadata and "max" in metadata:
            return f"between {_number(low)} and {_number(high)}"
        opening = "(" if "above" in metadata else "["
        closing = ")" if "below" in metadata else "]"
        return f"in {opening}{_number(low)}, {_number(high)}{closing}"
    if low is not None and "above" in metadata and low == 0:
        return "a positive finite number" if kind is float else "positive"
    if low is not None:
        bound = f"{'>' if 'above' in metadata else '>='} {_number(low)}"
    else:
        bound = f"{'<' if 'below' in metadata else '<='} {_number(high)}"
    return f"a finite number {bound}" if kind is float else bound


def _number(value: float) -> str:
    """A bound as written in a message: 0.0 as 0, 1e-06 as 1e-06."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def option_kind(hint: Any) -> type | None:
    """The one type of `OPTION_TYPES` an annotation `X` or `X | None` names, else None."""
    kinds = [kind for kind in (typing.get_args(hint) or (hint,)) if kind is not type(None)]
    return kinds[0] if len(kinds) == 1 and kinds[0] in OPTION_TYPES else None


def check_option(name: str, value: Any, kind: type, metadata: Any) -> Any:
    """`value` of option `name` as a `kind` (an int is a float too), checked against the
    `choices` and the range of `metadata` (see `OPTION_METADATA`); None passes.

    Returns:
        The value, an int given for a float option as a float.

    Raises:
        ConfigError: naming `name`, with what the value must be and what it is.
    """
    if value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{name} must be a {kind.__name__}, got {value!r}", [name])
    choices = metadata.get("choices")
    if choices is not None and value not in choices:
        raise ConfigError(
            f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}", [name]
        )
    wanted = describe_range(kind, metadata)
    if kind is float and not math.isfinite(value):  # NaN fails every comparison below
        raise ConfigError(f"{name} must be {wanted or 'a finite number'}, got {value}", [name])
    if wanted is not None and not _in_range(value, metadata):
        raise ConfigError(f"{name} must be {wanted}, got {value}", [name])
    if metadata.get("float32") and value > FLOAT32_MAX:
        raise ConfigError(
            f"{name} must be at most {FLOAT32_MAX:.4g} (the largest float32), got {value}", [name]
        )
    return value


def _in_range(value: float, metadata: Any) -> bool:
    bounds = (
        ("min", lambda bound: value >= bound),
        ("above", lambda bound: value > bound),
        ("max", lambda bound: value <= bound),
        ("below", lambda bound: value < bound),
    )
    return all(holds(metadata[key]) for key, holds in bounds if metadata.get(key) is not None)
