"""Attention distributions, chosen by name or instance."""

from __future__ import annotations

from keras_attn import _serializables, registry
from keras_attn.distributions.distribution import Distribution
from keras_attn.distributions.entmax import Entmax
from keras_attn.distributions.entmax15 import Entmax15
from keras_attn.distributions.hardmax import Hardmax
from keras_attn.distributions.sigmoid import Sigmoid
from keras_attn.distributions.softmax import Softmax
from keras_attn.distributions.sparsemax import Sparsemax

DISTRIBUTIONS: dict[str, type[Distribution]] = {
    "softmax": Softmax,
    "sigmoid": Sigmoid,
    "sparsemax": Sparsemax,
    "entmax15": Entmax15,
    "entmax": Entmax,
    "hardmax": Hardmax,
}


def get(identifier, **kwargs) -> Distribution:
    """Return a distribution object for a name, a `Distribution` instance or a config dict."""
    return registry.resolve(identifier, DISTRIBUTIONS, Distribution, "distribution", **kwargs)


serialize = registry.serialize


__all__ = [
    "DISTRIBUTIONS",
    "Distribution",
    "Entmax",
    "Entmax15",
    "Hardmax",
    "Sigmoid",
    "Softmax",
    "Sparsemax",
    "get",
    "serialize",
]

_serializables.imported(__name__)
