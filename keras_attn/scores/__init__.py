"""Alignment score functions `a(k_i, q)`, chosen by name or instance."""

from __future__ import annotations

import keras

from keras_attn.scores.additive_score import AdditiveScore, ConcatScore
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
    """Return a new score object for `identifier`.

    Args:
        identifier: a name in `SCORES`, a `Score` instance (returned as is), or a serialized
            config dict.
        **kwargs: constructor arguments when `identifier` is a name (e.g. `units=64`).

    Example:

    >>> type(get("general")).__name__
    'GeneralScore'
    """
    if isinstance(identifier, Score):
        return identifier
    if isinstance(identifier, dict):
        return keras.saving.deserialize_keras_object(identifier)
    if isinstance(identifier, str) and identifier in SCORES:
        return SCORES[identifier](**kwargs)
    raise ValueError(
        f"Expected score in {sorted(SCORES)} or a keras_attn.scores.Score. "
        f"Received: score={identifier!r}"
    )


def serialize(score) -> str | dict:
    """A score spec for `get_config()`: names stay names, objects become config dicts."""
    return score if isinstance(score, str) else keras.saving.serialize_keras_object(score)


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
