"""The 1.5-entmax distribution as a serializable object."""

from __future__ import annotations

from keras_attn import ops as attn_ops
from keras_attn.api_export import keras_attn_export
from keras_attn.distributions.distribution import Distribution


@keras_attn_export("keras_attn.distributions.Entmax15")
class Entmax15(Distribution):
    """Exact 1.5-entmax over the last axis: `p_i = max(s_i / 2 - tau, 0) ** 2`, summing to one.

    Sparse like sparsemax but smoother; the threshold `tau` is found exactly by sorting
    (Peters, Niculae and Martins, 2019); computed in float32 whatever the compute dtype.

    Call arguments:
        scores: raw scores, e.g. `(batch, T_q, T_k)`.
        attention_mask: bool, broadcastable to `scores`, True where attention is allowed.

    Returns:
        Weights of the shape and compute dtype of `scores`; exactly zero on masked positions and
        all zeros on a fully masked row. See `keras_attn.ops.entmax15`.

    Example:

    >>> import numpy as np
    >>> weights = Entmax15()(np.array([[0.0, 0.5, 1.0]], "float32"))
    >>> np.round(np.asarray(weights, "float64"), 4).tolist()
    [[0.0841, 0.2917, 0.6242]]

    References:
        Peters, Niculae and Martins, 2019, "Sparse Sequence-to-Sequence Models",
        arXiv:1905.05702.
    """

    def call(self, scores, attention_mask=None):
        return attn_ops.entmax15(scores, mask=attention_mask, axis=-1)
