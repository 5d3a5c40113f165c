"""Attention distributions, chosen by name or instance."""

from __future__ import annotations

from keras_attn import registry
from keras_attn.distributions.distribution import Distribution
from keras_attn.distributions.softmax import Softmax

DISTRIBUTIONS: dict[str, type[Distribution]] = {"softmax": Softmax}


def get(identifier, **kwargs) -> Distribution:
    """Return a distribution object for a name, a `Distribution` instance or a config dict."""
    return registry.resolve(identifier, DISTRIBUTIONS, Distribution, "distribution", **kwargs)


serialize = registry.serialize


__all__ = ["DISTRIBUTIONS", "Distribution", "Softmax", "get", "serialize"]
