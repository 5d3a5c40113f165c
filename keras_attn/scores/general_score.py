"""Luong's general (bilinear) score."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.scores.score import Score


@keras_attn_export("keras_attn.scores.GeneralScore")
class GeneralScore(Score):
    """General score `a(k_i, q) = q^T W k_i` with a learned `W` of shape `(d_q, d_k)`.

    The keys are projected once, `K' = K W^T` `(batch, T_k, d_q)`, then `a = q^T k'_i`.

    Args:
        kernel_initializer: initializer of `W`.

    References:
        Luong, Pham and Manning, 2015, arXiv:1508.04025, eq. (8) "general".
    """

    def __init__(self, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, keys_shape):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(query_shape[-1], keys_shape[-1]),
            initializer=clone_initializer(self.kernel_initializer),
        )
        super().build(query_shape, keys_shape)

    def prepare_keys(self, keys):
        # (batch, T_k, d_k) x (d_q, d_k) -> (batch, T_k, d_q)
        return ops.einsum("bkj,ij->bki", keys, self.kernel)

    def score(self, query, prepared_keys):
        return ops.einsum("bqi,bki->bqk", query, prepared_keys)

    def get_config(self):
        config = super().get_config()
        config["kernel_initializer"] = keras.initializers.serialize(self.kernel_initializer)
        return config
