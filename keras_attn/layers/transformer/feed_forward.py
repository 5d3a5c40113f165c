"""The Transformer's position-wise feed-forward network."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.transformer._arguments import (
    check_positive_int,
    check_rate,
    get_activation,
)
from keras_attn.ops.shapes import leading_shape


@keras_attn_export("keras_attn.layers.FeedForward")
class FeedForward(keras.layers.Layer):
    """Position-wise feed-forward network: two affine maps with an activation between them.

        FFN(x) = act(x W_1 + b_1) W_2 + b_2
        x: (batch, T, d)   W_1: (d, hidden_dim)   W_2: (hidden_dim, output_dim)

    The same weights are applied at every position independently (a 1x1 convolution). The
    Transformer uses ReLU (`activation="relu"`, the default); BERT and GPT use
    GELU (`activation="gelu"`). Dropout acts on the hidden activations `act(x W_1 + b_1)`. The
    Keras mask of the input passes through.

    Args:
        hidden_dim: width of the hidden layer (`d_ff`, 2048 in the base Transformer).
        output_dim: width of the output; defaults to the input's last axis.
        activation: any Keras activation (name or callable), e.g. `"relu"` or `"gelu"`.
        dropout: dropout rate on the hidden activations during training.
        use_bias: whether both maps have biases.
        kernel_initializer: initializer of `W_1` and `W_2`.
        bias_initializer: initializer of `b_1` and `b_2`.

    Call arguments:
        inputs: `(batch, T, d)`.
        training: enables dropout.

    Returns:
        `(batch, T, output_dim)` in the compute dtype.

    Example:

    >>> import numpy as np
    >>> ffn = FeedForward(hidden_dim=16, activation="gelu")
    >>> tuple(ffn(np.ones((2, 3, 8), "float32")).shape)
    (2, 3, 8)

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762 (eq. 2, section 3.3).
        Hendrycks & Gimpel, 2016, "Gaussian Error Linear Units (GELUs)", arXiv:1606.08415.
    """

    def __init__(
        self,
        hidden_dim: int,
        output_dim: int | None = None,
        activation="relu",
        dropout: float = 0.0,
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        if output_dim is not None:
            output_dim = check_positive_int("output_dim", output_dim)
        self.output_dim = output_dim
        self.activation = get_activation(activation)
        self.dropout = check_rate("dropout", dropout)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        output_dim = self.output_dim or inputs_shape[-1]
        self.hidden_dense = keras.layers.Dense(
            self.hidden_dim,
            activation=self.activation,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="hidden_dense",
        )
        self.hidden_dense.build(inputs_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(
            output_dim,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="output_dense",
        )
        self.output_dense.build((*inputs_shape[:-1], self.hidden_dim))
        self.built = True

    def call(self, inputs, training=None):
        # Both maps on the positions flattened to rows `(batch * T, d)`: the same matrix products
        # as on `(batch, T, d)`, where a Dense layer builds a tensordot (a dozen shape ops per
        # call, run at every step of a decoding loop).
        leading = leading_shape(inputs, 1)
        rows = ops.reshape(inputs, (-1, inputs.shape[-1]))
        hidden = self.dropout_layer(self.hidden_dense(rows), training=training)
        outputs = self.output_dense(hidden)
        return ops.reshape(outputs, (*leading, outputs.shape[-1]))

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.output_dim or input_shape[-1])

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self,
                "hidden_dim",
                "output_dim",
                "activation",
                "dropout",
                "use_bias",
                "kernel_initializer",
                "bias_initializer",
            )
        )
        return config
