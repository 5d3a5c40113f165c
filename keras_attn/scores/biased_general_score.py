"""Sordoni et al.'s biased general score."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.scores.score import Score


@keras_attn_export("keras_attn.scores.BiasedGeneralScore")
class BiasedGeneralScore(Score):
    """Biased general score `a(k_i, q) = k_i^T (W q + b)`.

    `W` `(d_k, d_q)` and `b` `(d_k,)` are learned. Since
    `k_i^T (W q + b) = (W^T k_i)^T q + k_i^T b`, all the key-side work is done once per source:
    `prepare_keys` returns `[K W ; K b]` `(batch, T_k, d_q + 1)`, and a step scores `[q; 1]`
    against it with one product.

    Args:
        kernel_initializer: initializer of `W`.
        bias_initializer: initializer of `b`.

    Call arguments:
        query: `(batch, T_q, d_q)`.
        keys: `(batch, T_k, d_k)`; `W` `(d_k, d_q)` joins the two widths.

    Returns:
        Unbounded scores `(batch, T_q, T_k)`.

    Example:

    >>> import numpy as np
    >>> layer = BiasedGeneralScore(kernel_initializer="ones", bias_initializer="ones")
    >>> q = np.ones((1, 1, 2), "float32"); k = np.array([[[1.0, 0.0], [1.0, 1.0]]], "float32")
    >>> layer(q, k).numpy().tolist()
    [[[3.0, 6.0]]]

    References:
        Sordoni, Bachman, Trischler and Bengio, 2016, "Iterative Alternating Neural Attention
        for Machine Reading", arXiv:1606.02245, section 3.
    """

    def __init__(self, kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, query_shape, keys_shape):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(keys_shape[-1], query_shape[-1]),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.bias = self.add_weight(
            name="bias",
            shape=(keys_shape[-1],),
            initializer=clone_initializer(self.bias_initializer),
        )
        super().build(query_shape, keys_shape)

    def prepare_keys(self, keys):
        projected = ops.einsum("bkj,ji->bki", keys, self.kernel)  # (batch, T_k, d_q)
        offset = ops.einsum("bkj,j->bk", keys, self.bias)  # (batch, T_k)
        return ops.concatenate([projected, ops.expand_dims(offset, -1)], axis=-1)

    def score(self, query, prepared_keys):
        # [q; 1]: (batch, T_q, d_q + 1) x (batch, T_k, d_q + 1) -> (batch, T_q, T_k)
        augmented = ops.concatenate([query, ops.ones_like(query[..., :1])], axis=-1)
        return ops.einsum("bqi,bki->bqk", augmented, prepared_keys)

    def get_config(self):
        config = super().get_config()
        config.update(
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
        )
        return config
