"""Attention distributions, chosen by name or instance."""

from __future__ import annotations

import keras

from keras_attn.distributions.distribution import Distribution
from keras_attn.distributions.softmax import Softmax

DISTRIBUTIONS: dict[str, type[Distribution]] = {"softmax": Softmax}


def get(identifier, **kwargs) -> Distribution:
    """Return a distribution object for a name, a `Distribution` instance or a config dict."""
    if isinstance(identifier, Distribution):
        return identifier
    if isinstance(identifier, dict):
        return keras.saving.deserialize_keras_object(identifier)
    if isinstance(identifier, str) and identifier in DISTRIBUTIONS:
        return DISTRIBUTIONS[identifier](**kwargs)
    raise ValueError(
        f"Expected distribution in {sorted(DISTRIBUTIONS)} or a "
        f"keras_attn.distributions.Distribution. Received: distribution={identifier!r}"
    )


def serialize(distribution) -> str | dict:
    """A distribution spec for `get_config()`: names stay names, objects become config dicts."""
    if isinstance(distribution, str):
        return distribution
    return keras.saving.serialize_keras_object(distribution)


__all__ = ["DISTRIBUTIONS", "Distribution", "Softmax", "get", "serialize"]
