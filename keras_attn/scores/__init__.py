"""Alignment score functions `a(k_i, q)`, chosen by name or instance."""

from __future__ import annotations

from keras_attn import _serializables, registry
from keras_attn.scores.activated_general_score import ActivatedGeneralScore
from keras_attn.scores.additive_score import AdditiveScore
from keras_attn.scores.biased_general_score import BiasedGeneralScore
from keras_attn.scores.concat_score import ConcatScore
from keras_attn.scores.cosine_score import CosineScore
from keras_attn.scores.deep_score import DeepScore
from keras_attn.scores.dot_score import DotScore
from keras_attn.scores.feature_score import FeatureScore
from keras_attn.scores.general_score import GeneralScore
from keras_attn.scores.location_score import LocationScore
from keras_attn.scores.residual_general_score import ResidualGeneralScore
from keras_attn.scores.scaled_dot_score import ScaledDotScore
from keras_attn.scores.scaled_general_score import ScaledGeneralScore
from keras_attn.scores.score import Score

SCORES: dict[str, type[Score]] = {
    "dot": DotScore,
    "general": GeneralScore,
    "concat": ConcatScore,
    "additive": AdditiveScore,
    "cosine": CosineScore,
    "scaled_dot": ScaledDotScore,
    "scaled_general": ScaledGeneralScore,
    "residual_general": ResidualGeneralScore,
    "biased_general": BiasedGeneralScore,
    "activated_general": ActivatedGeneralScore,
    "deep": DeepScore,
    "location": LocationScore,
    "feature": FeatureScore,
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
    "ActivatedGeneralScore",
    "AdditiveScore",
    "BiasedGeneralScore",
    "ConcatScore",
    "CosineScore",
    "DeepScore",
    "DotScore",
    "FeatureScore",
    "GeneralScore",
    "LocationScore",
    "ResidualGeneralScore",
    "ScaledDotScore",
    "ScaledGeneralScore",
    "Score",
    "get",
    "serialize",
]

_serializables.imported(__name__)
