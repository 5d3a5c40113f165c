"""The sigmoid distribution as a serializable object."""

from __future__ import annotations

from keras_attn import ops as attn_ops
from keras_attn.api_export import keras_attn_export
from keras_attn.distributions.distribution import Distribution


@keras_attn_export("keras_attn.distributions.Sigmoid")
class Sigmoid(Distribution):
    """Elementwise logistic weights `sigmoid(s_i)` over the last axis, not normalised.

    Call arguments:
        scores: raw scores, e.g. `(batch, T_q, T_k)`.
        attention_mask: bool, broadcastable to `scores`, True where attention is allowed.

    Returns:
        Weights of the shape and compute dtype of `scores`; exactly zero on masked positions and
        all zeros on a fully masked row. See `keras_attn.ops.sigmoid`.

    Example:

    >>> import numpy as np
    >>> weights = Sigmoid()(np.array([[0.0, 2.0]], "float32"))
    >>> np.round(np.asarray(weights, "float64"), 4).tolist()
    [[0.5, 0.8808]]
    """

    def call(self, scores, attention_mask=None):
        return attn_ops.sigmoid(scores, mask=attention_mask, axis=-1)
