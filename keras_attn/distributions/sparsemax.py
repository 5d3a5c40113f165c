"""The sparsemax distribution as a serializable object."""

from __future__ import annotations

from keras_attn import ops as attn_ops
from keras_attn.api_export import keras_attn_export
from keras_attn.distributions.distribution import Distribution


@keras_attn_export("keras_attn.distributions.Sparsemax")
class Sparsemax(Distribution):
    """Sparsemax over the last axis: `p = argmin_{p in simplex} ||p - s||^2`, sparse and exact.

    `p_i = max(s_i - tau, 0)` with the sort-based threshold `tau` of Martins and Astudillo
    (2016); computed in float32 whatever the compute dtype.

    Call arguments:
        scores: raw scores, e.g. `(batch, T_q, T_k)`.
        attention_mask: bool, broadcastable to `scores`, True where attention is allowed.

    Returns:
        Weights of the shape and compute dtype of `scores`; exactly zero on masked positions and
        all zeros on a fully masked row. See `keras_attn.ops.sparsemax`.

    Example:

    >>> import numpy as np
    >>> weights = Sparsemax()(np.array([[0.1, 1.1, 0.5]], "float32"))
    >>> np.round(np.asarray(weights, "float64"), 4).tolist()
    [[0.0, 0.8, 0.2]]

    References:
        Martins and Astudillo, 2016, "From Softmax to Sparsemax: A Sparse Model of Attention and
        Multi-Label Classification", arXiv:1602.02068.
    """

    def call(self, scores, attention_mask=None):
        return attn_ops.sparsemax(scores, mask=attention_mask, axis=-1)
