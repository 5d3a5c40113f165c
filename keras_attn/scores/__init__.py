"""Alignment score functions `a(k_i, q)`, chosen by name or instance."""

from __future__ import annotations

from keras_attn import registry
from keras_attn.scores.additive_score import AdditiveScore
from keras_attn.scores.concat_score import ConcatScore
from keras_attn.scores.dot_score import DotScore
from keras_attn.scores.general_score import GeneralScore
from keras_attn.scores.score import Score

SCORES: dict[str, type[Score]] = {
    "dot": DotScore,
    "general": GeneralScore,
    "concat": ConcatScore,
    "additive": AdditiveScore,
}


def get(identifier, **kwargs) -> Score:
    """Return a score object for a name in `SCORES` (built with `**kwargs`, e.g. `units=64`), a
    `Score` instance (returned as is) or a serialized config dict.

    Example:

    >>> type(get("general")).__name__
    'GeneralScore'
    """
    return registry.resolve(identifier, SCORES, Score, "score", **kwargs)


serialize = registry.serialize


__all__ = [
    "SCORES",
    "AdditiveScore",
    "ConcatScore",
    "DotScore",
    "GeneralScore",
    "Score",
    "get",
    "serialize",
]
