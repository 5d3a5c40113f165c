"""Luong's dot score."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.scores.score import Score


@keras_attn_export("keras_attn.scores.DotScore")
class DotScore(Score):
    """Dot-product score `a(k_i, q) = q^T k_i` (no parameters).

    Shapes: query `(batch, T_q, d)`, keys `(batch, T_k, d)` → scores `(batch, T_q, T_k)`. Query
    and key sizes must be equal.

    Example:

    >>> import numpy as np
    >>> q = np.ones((1, 1, 2), "float32"); k = np.array([[[1.0, 2.0], [3.0, 4.0]]], "float32")
    >>> DotScore()(q, k).numpy().tolist()
    [[[3.0, 7.0]]]

    References:
        Luong, Pham and Manning, 2015, "Effective Approaches to Attention-based Neural Machine
        Translation", arXiv:1508.04025.
    """

    def build(self, query_shape, keys_shape):
        query_size, key_size = query_shape[-1], keys_shape[-1]
        if query_size is not None and key_size is not None and query_size != key_size:
            raise ValueError(
                f"{type(self).__name__} needs queries and keys of the same size. "
                f"Received: query_shape={tuple(query_shape)}, keys_shape={tuple(keys_shape)}"
            )
        super().build(query_shape, keys_shape)

    def score(self, query, prepared_keys):
        # (batch, T_q, d) x (batch, T_k, d) -> (batch, T_q, T_k)
        return ops.einsum("bqd,bkd->bqk", query, prepared_keys)
