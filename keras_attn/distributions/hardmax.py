"""The hardmax distribution as a serializable object."""

from __future__ import annotations

from keras_attn import ops as attn_ops
from keras_attn.api_export import keras_attn_export
from keras_attn.distributions.distribution import Distribution


@keras_attn_export("keras_attn.distributions.Hardmax")
class Hardmax(Distribution):
    """Hard attention over the last axis: one-hot of the arg max among allowed positions.

    Ties go to the first position. The weights are piecewise constant, so their gradient is zero
    (returned as zeros, not None): scores feeding a `Hardmax` receive no training signal.

    Call arguments:
        scores: raw scores, e.g. `(batch, T_q, T_k)`.
        attention_mask: bool, broadcastable to `scores`, True where attention is allowed.

    Returns:
        Weights of the shape and compute dtype of `scores`; exactly zero on masked positions and
        all zeros on a fully masked row. See `keras_attn.ops.hardmax`.

    Example:

    >>> import numpy as np
    >>> weights = Hardmax()(np.array([[1.0, 3.0, 3.0]], "float32"))
    >>> np.round(np.asarray(weights, "float64"), 4).tolist()
    [[0.0, 1.0, 0.0]]
    """

    def call(self, scores, attention_mask=None):
        return attn_ops.hardmax(scores, mask=attention_mask, axis=-1)
