"""Argument checks and config entries shared by the attention, Transformer, recurrent and
embedding layers."""

from __future__ import annotations

import keras


def check_positive_int(name: str, value) -> int:
    """`value` as an int; a ValueError quoting it unless it is a positive int (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Expected {name} to be a positive int. Received: {name}={value!r}")
    return int(value)


def check_rate(name: str, value) -> float:
    """`value` as a float; a ValueError quoting it unless it is a number in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"Expected {name} in [0, 1). Received: {name}={value!r}")
    return float(value)


def check_positive_float(name: str, value) -> float:
    """`value` as a float; a ValueError quoting it unless it is a number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"Expected {name} > 0. Received: {name}={value!r}")
    return float(value)


def check_choice(name: str, value, choices):
    """`value`; a ValueError quoting it and the accepted values unless it is in `choices`."""
    if value not in choices:
        raise ValueError(f"Expected {name} in {list(choices)}. Received: {name}={value!r}")
    return value


def get_activation(activation):
    """`keras.activations.get(activation)`, with an error that quotes the argument."""
    try:
        return keras.activations.get(activation)
    except ValueError as error:
        raise ValueError(
            f"Expected a Keras activation. Received: activation={activation!r}"
        ) from error


def serialize_arguments(layer, *names: str) -> dict:
    """The `get_config()` entries of the constructor arguments `names`, kept by `layer` as
    attributes of the same name.

    Layers (scores, distributions, cells) and initializers are serialized by
    `keras.saving.serialize_keras_object`, other callables (activations) by
    `keras.activations.serialize` (a built-in by its name); other values (numbers, strings,
    None, lists, config dicts) are returned as they are.
    """
    return {name: _serialize(getattr(layer, name)) for name in names}


def _serialize(value):
    if isinstance(value, (keras.layers.Layer, keras.initializers.Initializer)):
        return keras.saving.serialize_keras_object(value)
    if callable(value):
        return keras.activations.serialize(value)
    return value
