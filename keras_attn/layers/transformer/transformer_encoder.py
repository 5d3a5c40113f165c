"""A stack of Transformer encoder blocks."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.transformer._arguments import check_positive_int
from keras_attn.layers.transformer._base import TransformerLayer
from keras_attn.layers.transformer.transformer_encoder_block import TransformerEncoderBlock


@keras_attn_export("keras_attn.layers.TransformerEncoder")
class TransformerEncoder(TransformerLayer):
    """`num_layers` `TransformerEncoderBlock`s applied in turn (the Transformer encoder; BERT).

        h_0 = X                                     (batch, T, d)
        h_l = EncoderBlock_l(h_{l-1})               l = 1 .. num_layers
        out = h_L, or LN(h_L) when normalize_first  (pre-LN stacks end with a LayerNorm)

    Every block has the same arguments (see `TransformerEncoderBlock`); the padding mask reaches
    every block.

    Args:
        num_layers: number of blocks `N` (6 in the base Transformer).
        num_heads, intermediate_dim, dropout, attention_dropout, activation, normalize_first,
            layer_norm_epsilon, kernel_initializer, bias_initializer: as in
            `TransformerEncoderBlock`, for every block.

    Call arguments:
        inputs: `(batch, T, d)`.
        inputs_mask: bool `(batch, T)`, True at real positions; filled from Keras masking when not
            given (as `inputs_mask`, or as `mask` when `inputs` is the only tensor argument).
        attention_mask: bool `(batch, T, T)`, True where attention is allowed.
        mask: the Keras mask of `inputs` (see `inputs_mask`).
        training: enables dropout.
        return_attention_scores: also return every block's self-attention weights. Without
            them the attention may take its fused path (see `MultiHeadAttention`).

    Returns:
        `(batch, T, d)`, or `(outputs, weights)` with `weights` `(batch, num_layers, heads, T, T)`
        when `return_attention_scores=True`. The Keras mask of `inputs` passes on.

    Example:

    >>> import numpy as np
    >>> encoder = TransformerEncoder(num_layers=2, num_heads=2, intermediate_dim=16)
    >>> x = np.random.rand(2, 5, 8).astype("float32")
    >>> y, weights = encoder(x, return_attention_scores=True)
    >>> tuple(y.shape), tuple(weights.shape)
    ((2, 5, 8), (2, 2, 2, 5, 5))

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762.
        Devlin et al., 2018, "BERT: Pre-training of Deep Bidirectional Transformers for Language
        Understanding", arXiv:1810.04805.
    """

    def __init__(
        self,
        num_layers: int,
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
        check_positive_int("num_layers", num_layers)
        super().__init__(
            num_heads,
            intermediate_dim,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation=activation,
            normalize_first=normalize_first,
            layer_norm_epsilon=layer_norm_epsilon,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            **kwargs,
        )
        self.num_layers = int(num_layers)

    def build(self, inputs_shape):
        self.blocks = []
        for index in range(self.num_layers):
            block = TransformerEncoderBlock(
                **self._block_arguments(), dtype=self.dtype_policy, name=f"block_{index}"
            )
            block.build(inputs_shape)
            self.blocks.append(block)
        self.final_norm = self._final_norm(inputs_shape)
        self.built = True

    def call(
        self,
        inputs,
        inputs_mask=None,
        attention_mask=None,
        mask=None,
        training=None,
        return_attention_scores=False,
    ):
        padding = inputs_mask if inputs_mask is not None else mask
        x, weights = inputs, []
        for block in self.blocks:
            # Weights only when asked: without them the attention may take its fused path.
            outputs = block(
                x,
                inputs_mask=padding,
                attention_mask=attention_mask,
                training=training,
                return_attention_scores=return_attention_scores,
            )
            if return_attention_scores:
                x, block_weights = outputs
                weights.append(block_weights)
            else:
                x = outputs
        if self.final_norm is not None:
            x = self.final_norm(x)
        if return_attention_scores:
            return x, ops.stack(weights, axis=1)
        return x

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers)
        return config
