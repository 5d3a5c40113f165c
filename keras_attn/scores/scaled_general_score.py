"""Luong's general score with Vaswani et al.'s 1/sqrt(d) factor."""

from __future__ import annotations

import math

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.scores.general_score import GeneralScore


@keras_attn_export("keras_attn.scores.ScaledGeneralScore")
class ScaledGeneralScore(GeneralScore):
    """Scaled general score `a(k_i, q) = q^T W k_i / sqrt(d_q)`, `W` `(d_q, d_k)` learned.

    Luong et al.'s bilinear score (eq. 8) divided by the square root of the size of the space the
    final dot product runs in, as Vaswani et al. do for the dot product. Under Adam every entry
    of `W` moves by about the learning rate per step whatever the gradient's scale, so a step can
    change `q^T W k` by up to `lr * sum_ij |q_i| |k_j|`, which grows with `d_q * d_k`; the factor
    divides both the initial scores and that per-step change by `sqrt(d_q)`. The function class
    is the same as `GeneralScore`'s (`W' = W / sqrt(d_q)`).

    The keys are projected and scaled once, `K' = K W^T / sqrt(d_q)` `(batch, T_k, d_q)`, then
    `a = q^T k'_i`.

    Args:
        kernel_initializer: initializer of `W`.

    Example:

    >>> import numpy as np
    >>> score = ScaledGeneralScore(kernel_initializer="identity")
    >>> q = np.ones((1, 1, 4), "float32"); k = np.array([[[1.0, 2.0, 3.0, 4.0]]], "float32")
    >>> score(q, k).numpy().tolist()
    [[[5.0]]]

    References:
        Luong, Pham and Manning, 2015, arXiv:1508.04025, eq. (8) "general".
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762, eq. (1).
    """

    def build(self, query_shape, keys_shape):
        if query_shape[-1] is None:
            raise ValueError(
                "ScaledGeneralScore needs a known query size d_q. "
                f"Received: query_shape={tuple(query_shape)}"
            )
        self._scale = 1.0 / math.sqrt(query_shape[-1])
        super().build(query_shape, keys_shape)

    def prepare_keys(self, keys):
        prepared = super().prepare_keys(keys)  # (batch, T_k, d_q)
        return prepared * ops.cast(self._scale, prepared.dtype)
