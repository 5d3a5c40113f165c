"""Arguments, config and sublayers shared by the Transformer blocks and stacks."""

from __future__ import annotations

import keras

from keras_attn._initializers import clone_initializer
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.attention.multi_head_attention import MultiHeadAttention
from keras_attn.layers.mask_passthrough import FirstInputMaskPassthrough
from keras_attn.layers.transformer._arguments import (
    check_positive_float,
    check_positive_int,
    check_rate,
    get_activation,
)
from keras_attn.layers.transformer._residual import residual
from keras_attn.layers.transformer.feed_forward import FeedForward

# The arguments every block of a stack shares with the stack, in config order.
BLOCK_ARGUMENTS = (
    "num_heads",
    "intermediate_dim",
    "dropout",
    "attention_dropout",
    "activation",
    "normalize_first",
    "layer_norm_epsilon",
    "kernel_initializer",
    "bias_initializer",
)


class TransformerLayer(FirstInputMaskPassthrough, keras.layers.Layer):
    """Base of `TransformerEncoderBlock`, `TransformerDecoderBlock` and their stacks.

    Validates and keeps the arguments in `BLOCK_ARGUMENTS` (see `TransformerEncoderBlock` for
    their meaning), returns them from `get_config`, and makes the sublayers of a block: a
    `MultiHeadAttention`, the `FeedForward` network and the LayerNorms, each built at once.
    """

    def __init__(
        self,
        num_heads: int,
        intermediate_dim: int,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation="relu",
        normalize_first: bool = False,
        layer_norm_epsilon: float = 1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.intermediate_dim = check_positive_int("intermediate_dim", intermediate_dim)
        self.dropout = check_rate("dropout", dropout)
        self.attention_dropout = check_rate("attention_dropout", attention_dropout)
        self.activation = get_activation(activation)
        self.normalize_first = bool(normalize_first)
        self.layer_norm_epsilon = check_positive_float("layer_norm_epsilon", layer_norm_epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def _check_model_dim(self, inputs_shape) -> int:
        """The input width `d`; a ValueError unless `num_heads` divides it."""
        model_dim = inputs_shape[-1]
        if model_dim % self.num_heads:
            raise ValueError(
                f"Expected the input width to be divisible by num_heads={self.num_heads}. "
                f"Received: inputs_shape={tuple(inputs_shape)}"
            )
        return model_dim

    def _attention(self, name: str, inputs_shape, memory_shape) -> MultiHeadAttention:
        """A built `MultiHeadAttention` with `d / num_heads` features per head."""
        attention = MultiHeadAttention(
            self.num_heads,
            inputs_shape[-1] // self.num_heads,
            dropout=self.attention_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        attention.build(inputs_shape, memory_shape)
        return attention

    def _feed_forward(self, inputs_shape) -> FeedForward:
        """The built position-wise feed-forward network, `d -> intermediate_dim -> d`."""
        feed_forward = FeedForward(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="feed_forward",
        )
        feed_forward.build(inputs_shape)
        return feed_forward

    def _layer_norm(self, name: str, shape) -> keras.layers.LayerNormalization:
        norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        norm.build(shape)
        return norm

    def _sublayer(self, x, sublayer, norm, training):
        """`residual(x, sublayer, ...)` with the block's dropout and LayerNorm placement.

        Returns `(y, extra)`, `extra` being what `sublayer` returns beside its output.
        """
        return residual(x, sublayer, norm, self.dropout_layer, self.normalize_first, training)

    def _feed_forward_sublayer(self, x, training):
        """The feed-forward network with its residual connection and LayerNorm."""
        y, _ = self._sublayer(
            x,
            lambda h: (self.feed_forward(h, training=training), None),
            self.feed_forward_norm,
            training,
        )
        return y

    def _final_norm(self, inputs_shape):
        """The LayerNorm that ends a pre-LN stack, None for a post-LN one."""
        return self._layer_norm("final_norm", inputs_shape) if self.normalize_first else None

    def _block_arguments(self) -> dict:
        """The serialized `BLOCK_ARGUMENTS`, to make the blocks of a stack."""
        return serialize_arguments(self, *BLOCK_ARGUMENTS)

    def get_config(self):
        config = super().get_config()
        config.update(serialize_arguments(self, *BLOCK_ARGUMENTS))
        return config
