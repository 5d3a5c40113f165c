"""Attention pooling against a learned context vector (the HAN word/sentence attention)."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn import ops as attn_ops
from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.mask_passthrough import PooledOutputMask


@keras_attn_export("keras_attn.layers.ContextAttentionPooling")
class ContextAttentionPooling(PooledOutputMask, keras.layers.Layer):
    """Self-attention pooling with a learned context vector: `s = sum_t alpha_t h_t`.

    `u_t = tanh(W h_t + b)` `(batch, T, units)`, `alpha = softmax_t(u_t^T u)` `(batch, T)` with a
    learned context vector `u` `(units,)`, and `s = sum_t alpha_t h_t` `(batch, d)` for inputs `h`
    `(batch, T, d)`. The softmax is taken in float32 over the real (unmasked) positions only.

    Args:
        units: size of the hidden projection `u_t` and of the context vector `u`.
        kernel_initializer: initializer of `W` `(d, units)`.
        context_initializer: initializer of the context vector `u`.

    Call arguments:
        inputs: `(batch, T, d)`.
        mask: bool `(batch, T)`, True at real positions; filled from Keras masking. Padded
            positions get exactly zero weight; a fully padded row gives all-zero weights and a
            zero output.
        return_attention_scores: also return the weights.

    Returns:
        `pooled` `(batch, d)`, or `(pooled, weights)` with `weights` `(batch, T)` when
        `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = ContextAttentionPooling(8)
    >>> pooled, weights = layer(np.ones((2, 5, 4), "float32"), return_attention_scores=True)
    >>> tuple(pooled.shape), tuple(weights.shape)
    ((2, 4), (2, 5))

    References:
        Yang, Yang, Dyer, He, Smola and Hovy, 2016, "Hierarchical Attention Networks for Document
        Classification", NAACL, eqs. (5)-(7) and (8)-(10).
    """

    def __init__(
        self,
        units: int,
        kernel_initializer="glorot_uniform",
        context_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
            raise ValueError(f"Expected units to be a positive integer. Received: units={units!r}")
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.context_initializer = keras.initializers.get(context_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(inputs_shape[-1], self.units),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")
        self.context = self.add_weight(
            name="context",
            shape=(self.units,),
            initializer=clone_initializer(self.context_initializer),
        )
        self.built = True

    def call(self, inputs, mask=None, return_attention_scores=False):
        # (batch, T, d) x (d, units) -> (batch, T, units)
        hidden = ops.tanh(ops.einsum("btd,du->btu", inputs, self.kernel) + self.bias)
        scores = ops.einsum("btu,u->bt", hidden, self.context)  # (batch, T)
        weights = attn_ops.softmax(scores, mask=mask, axis=-1)
        # (batch, T) x (batch, T, d) -> (batch, d)
        pooled = ops.einsum("bt,btd->bd", weights, inputs)
        if return_attention_scores:
            return pooled, weights
        return pooled

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(self, "units", "kernel_initializer", "context_initializer")
        )
        return config
