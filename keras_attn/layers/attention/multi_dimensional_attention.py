"""Multi-dimensional (feature-wise) attention pooling, DiSAN's source2token attention."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn import ops as attn_ops
from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.layers.MultiDimensionalAttention")
class MultiDimensionalAttention(keras.layers.Layer):
    """Multi-dimensional attention pooling: one distribution over the tokens per feature.

    For tokens `x_i` `(batch, T, d)`, every token gets a score vector with one entry per feature,

        f(x_i) = W_2 act(W_1 x_i + b_1) + b_2                (batch, T, d)
        alpha_k = softmax_i(f(x_i)_k), for each feature k    (batch, d, T)
        s = sum_i alpha_{., i} * x_i                          (batch, d)

    so feature `k` of the output is a convex combination of feature `k` of the tokens. The
    softmax is taken in float32 over the real (unmasked) tokens only.

    The weights are laid out `(batch, d, T)`, not `(batch, T, d)`: as for every attention layer in
    keras_attn, the last axis is the axis the distribution runs over (here the tokens), so
    `weights.sum(-1)` is one for every feature.

    Args:
        units: size of the hidden layer `W_1` `(d, units)`.
        activation: the hidden activation, a Keras activation name or function (DiSAN uses
            `"elu"`).
        kernel_initializer: initializer of `W_1` and `W_2`.

    Call arguments:
        inputs: `(batch, T, d)`.
        mask: bool `(batch, T)`, True at real tokens; filled from Keras masking. Padded tokens get
            exactly zero weight in every feature; a fully padded row gives zero weights and a zero
            output.
        return_attention_scores: also return the weights.

    Returns:
        `pooled` `(batch, d)`, or `(pooled, weights)` with `weights` `(batch, d, T)` when
        `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = MultiDimensionalAttention(8)
    >>> pooled, weights = layer(np.ones((2, 5, 4), "float32"), return_attention_scores=True)
    >>> tuple(pooled.shape), tuple(weights.shape)
    ((2, 4), (2, 4, 5))

    References:
        Shen, Zhou, Long, Jiang, Pan and Zhang, 2018, "DiSAN: Directional Self-Attention Network
        for RNN/CNN-Free Language Understanding", AAAI, arXiv:1709.04696, section 3 (eq. 7 and
        the multi-dimensional source2token attention).
    """

    def __init__(
        self,
        units: int,
        activation="elu",
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
            raise ValueError(f"Expected units to be a positive integer. Received: units={units!r}")
        try:
            self.activation_fn = keras.activations.get(activation)
        except (ValueError, TypeError) as error:
            raise ValueError(
                f"Expected activation to be a Keras activation name or function. "
                f"Received: activation={activation!r}"
            ) from error
        self.units = units
        self.activation = activation
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        depth = inputs_shape[-1]
        self.hidden_kernel = self.add_weight(
            name="hidden_kernel", shape=(depth, self.units), initializer=self.kernel_initializer
        )
        self.hidden_bias = self.add_weight(
            name="hidden_bias", shape=(self.units,), initializer="zeros"
        )
        self.score_kernel = self.add_weight(
            name="score_kernel", shape=(self.units, depth), initializer=self.kernel_initializer
        )
        self.score_bias = self.add_weight(name="score_bias", shape=(depth,), initializer="zeros")
        self.built = True

    def call(self, inputs, mask=None, return_attention_scores=False):
        # (batch, T, d) x (d, units) -> (batch, T, units)
        hidden = self.activation_fn(
            ops.einsum("btd,du->btu", inputs, self.hidden_kernel) + self.hidden_bias
        )
        # (batch, T, units) x (units, d) -> (batch, d, T): one score row per feature
        scores = ops.einsum("btu,ud->bdt", hidden, self.score_kernel)
        scores = scores + ops.expand_dims(self.score_bias, -1)
        if mask is not None:
            mask = ops.expand_dims(ops.cast(mask, "bool"), 1)  # (batch, 1, T)
        weights = attn_ops.softmax(scores, mask=mask, axis=-1)
        # (batch, d, T) * (batch, T, d) -> (batch, d), feature by feature
        pooled = ops.einsum("bdt,btd->bd", weights, inputs)
        if return_attention_scores:
            return pooled, weights
        return pooled

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units,
            activation=keras.activations.serialize(self.activation_fn),
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        )
        return config
