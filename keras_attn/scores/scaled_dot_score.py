"""Vaswani et al.'s scaled dot-product score."""

from __future__ import annotations

import math

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.scores.dot_score import DotScore


@keras_attn_export("keras_attn.scores.ScaledDotScore")
class ScaledDotScore(DotScore):
    """Scaled dot-product score `a(k_i, q) = q^T k_i / sqrt(d_k)` (no parameters).

    Shapes: query `(batch, T_q, d_k)`, keys `(batch, T_k, d_k)` → scores `(batch, T_q, T_k)`.
    The factor `1 / sqrt(d_k)` is folded into the keys once (`prepare_keys`), so a decoder step is
    a plain dot product.

    Call arguments:
        query: `(batch, T_q, d_k)`.
        keys: `(batch, T_k, d_k)`.

    Returns:
        Scores `(batch, T_q, T_k)`.

    Example:

    >>> import numpy as np
    >>> q = np.ones((1, 1, 4), "float32"); k = np.array([[[1.0, 2.0, 3.0, 4.0]]], "float32")
    >>> ScaledDotScore()(q, k).numpy().tolist()
    [[[5.0]]]

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762, eq. (1).
    """

    def build(self, query_shape, keys_shape):
        if keys_shape[-1] is None:
            raise ValueError(
                "ScaledDotScore needs a known key size d_k. "
                f"Received: keys_shape={tuple(keys_shape)}"
            )
        self._scale = 1.0 / math.sqrt(keys_shape[-1])
        super().build(query_shape, keys_shape)

    def prepare_keys(self, keys):
        # (batch, T_k, d_k) / sqrt(d_k); ops.multiply also takes NumPy keys under PyTorch
        return ops.multiply(keys, ops.cast(self._scale, keys.dtype))
