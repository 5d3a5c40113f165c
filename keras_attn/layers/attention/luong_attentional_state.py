"""Luong's attentional hidden state: the context and the decoder state combined by one layer."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.mask_passthrough import FirstInputMaskPassthrough


@keras_attn_export("keras_attn.layers.LuongAttentionalState")
class LuongAttentionalState(FirstInputMaskPassthrough, keras.layers.Layer):
    """Attentional hidden state `h~_t = tanh(W_c [c_t; h_t])` (Luong et al., eq. 5).

    The context `c_t` `(batch, T, d_c)` and the decoder hidden state `h_t` `(batch, T, d_h)` are
    concatenated on the feature axis and projected by `W_c` `(d_c + d_h, units)`; the result is
    `(batch, T, units)`. `h~_t` feeds the softmax layer and, with input feeding, the next step.
    `W_c` is stored as one kernel whose first `d_c` rows multiply `c_t`, so the concatenation is
    never materialised: `W_c [c_t; h_t] = c_t W_c[:d_c] + h_t W_c[d_c:]`.

    Args:
        units: size of `h~_t`.
        activation: the nonlinearity, `"tanh"` in the paper.
        use_bias: add a bias `b_c` `(units,)` inside the activation (the paper has none).
        kernel_initializer: initializer of `W_c`.

    Call arguments:
        context: `c_t`, `(batch, T, d_c)`.
        hidden: `h_t`, `(batch, T, d_h)`.
        context_mask, hidden_mask: bool `(batch, T)`, filled from Keras masking. The output is
            per position, so padding never mixes into real positions and the masks only need to
            travel on: the output carries the Keras mask of `context` (Keras propagates the mask
            of a layer's first input), so attach the target padding mask to `context`.

    Returns:
        `h~` `(batch, T, units)`.

    Example:

    >>> import numpy as np
    >>> layer = LuongAttentionalState(6)
    >>> out = layer(np.ones((2, 3, 4), "float32"), np.ones((2, 3, 5), "float32"))
    >>> tuple(out.shape)
    (2, 3, 6)

    References:
        Luong, Pham and Manning, 2015, "Effective Approaches to Attention-based Neural Machine
        Translation", arXiv:1508.04025, eq. (5).
    """

    def __init__(
        self,
        units: int,
        activation="tanh",
        use_bias: bool = False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
            raise ValueError(f"Expected units to be a positive integer. Received: units={units!r}")
        if not isinstance(use_bias, bool):
            raise ValueError(f"Expected use_bias to be a bool. Received: use_bias={use_bias!r}")
        self.units = units
        self.activation = keras.activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, context_shape, hidden_shape):
        self.context_size = context_shape[-1]
        self.kernel = self.add_weight(
            name="kernel",
            shape=(context_shape[-1] + hidden_shape[-1], self.units),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.bias = (
            self.add_weight(name="bias", shape=(self.units,), initializer="zeros")
            if self.use_bias
            else None
        )
        self.built = True

    def call(self, context, hidden, context_mask=None, hidden_mask=None):
        # (batch, T, d_c) x (d_c, units) + (batch, T, d_h) x (d_h, units) -> (batch, T, units)
        projected = ops.matmul(context, self.kernel[: self.context_size]) + ops.matmul(
            hidden, self.kernel[self.context_size :]
        )
        if self.bias is not None:
            projected = projected + self.bias
        return self.activation(projected)

    def compute_output_shape(self, context_shape, hidden_shape):
        return tuple(hidden_shape[:-1]) + (self.units,)

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(self, "units", "activation", "use_bias", "kernel_initializer")
        )
        return config
