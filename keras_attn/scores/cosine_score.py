"""Graves et al.'s content-based (cosine similarity) score."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.scores.dot_score import DotScore


@keras_attn_export("keras_attn.scores.CosineScore")
class CosineScore(DotScore):
    """Cosine similarity score `a(k_i, q) = q^T k_i / (max(|q|, eps) max(|k_i|, eps))`.

    The content-based similarity score with `sim` the cosine, as in the content-based
    addressing of the Neural Turing Machine (without its sharpening factor `beta`). Shapes: query
    `(batch, T_q, d)`, keys `(batch, T_k, d)` → scores `(batch, T_q, T_k)`, each in `[-1, 1]`; no
    parameters. The norms are taken in float32 and clamped below by `epsilon`, so a zero vector
    scores 0 against everything instead of NaN. `prepare_keys` returns the unit-length keys.

    Args:
        epsilon: lower bound of the norms, a positive float.

    Call arguments:
        query: `(batch, T_q, d)`.
        keys: `(batch, T_k, d)`, the same size `d` as the query.

    Returns:
        Scores `(batch, T_q, T_k)`.

    Example:

    >>> import numpy as np
    >>> q = np.array([[[1.0, 0.0]]], "float32")
    >>> k = np.array([[[2.0, 0.0], [0.0, 3.0], [-1.0, 0.0], [0.0, 0.0]]], "float32")
    >>> CosineScore()(q, k).numpy().tolist()
    [[[1.0, 0.0, -1.0, 0.0]]]

    References:
        Graves, Wayne and Danihelka, 2014, "Neural Turing Machines", arXiv:1410.5401, eq. (6).
    """

    def __init__(self, epsilon: float = 1e-6, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(epsilon, (int, float)) or isinstance(epsilon, bool) or epsilon <= 0:
            raise ValueError(
                f"Expected epsilon to be a positive float. Received: epsilon={epsilon!r}"
            )
        self.epsilon = float(epsilon)

    def _unit(self, x):
        """`x / max(|x|, eps)` along the last axis, normalised in float32."""
        dtype = x.dtype
        x = ops.cast(x, "float32")
        squared_norm = ops.sum(ops.square(x), axis=-1, keepdims=True)
        inverse_norm = ops.rsqrt(ops.maximum(squared_norm, self.epsilon**2))
        return ops.cast(x * inverse_norm, dtype)

    def prepare_keys(self, keys):
        return self._unit(keys)  # (batch, T_k, d), unit length or zero

    def score(self, query, prepared_keys):
        return super().score(self._unit(query), prepared_keys)

    def get_config(self):
        config = super().get_config()
        config["epsilon"] = self.epsilon
        return config
