"""A stack of Transformer decoder blocks, with or without cross-attention, with a KV cache."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.transformer._arguments import check_positive_int
from keras_attn.layers.transformer._base import TransformerLayer
from keras_attn.layers.transformer.transformer_decoder_block import TransformerDecoderBlock


@keras_attn_export("keras_attn.layers.TransformerDecoder")
class TransformerDecoder(TransformerLayer):
    """`num_layers` `TransformerDecoderBlock`s applied in turn (the Transformer decoder; GPT).

        h_0 = X                                          (batch, T, d)
        h_l = DecoderBlock_l(h_{l-1}, memory)            l = 1 .. num_layers
        out = h_L, or LN(h_L) when normalize_first       (pre-LN stacks end with a LayerNorm)

    With `cross_attention=False` the blocks have no cross-attention and the stack is a GPT-style
    decoder-only model (call it without `memory`). Every block attends causally.

    Incremental decoding: `initial_cache(batch_size, max_length, memory)` returns a tuple with
    one block cache per layer (see `TransformerDecoderBlock`: dicts of `(batch, heads, S, d/h)`
    tensors; the cross-attention entries hold every layer's projection of `memory`, computed
    once). `decoder(x_t, cache=cache, cache_index=t, memory_mask=...)` returns
    `(outputs, cache)`. Every cache tensor is batch-major, so beam search can reorder it with
    one gather on axis 0.

    Args:
        num_layers: number of blocks `N`.
        num_heads, intermediate_dim, cross_attention, dropout, attention_dropout, activation,
            normalize_first, layer_norm_epsilon, kernel_initializer, bias_initializer: as in
            `TransformerDecoderBlock`, for every block.

    Call arguments:
        inputs: `(batch, T, d)`.
        memory: encoder output `(batch, T_x, d_x)`: required with `cross_attention` (except in
            cached calls, whose cache holds it), None without.
        inputs_mask: bool `(batch, T)`; filled from Keras masking when not given.
        memory_mask: bool `(batch, T_x)`; filled from `memory`'s Keras mask when not given.
        attention_mask: bool `(batch, T, T)` (`(batch, T, S)` with a cache), combined with the
            causal mask.
        mask: the Keras mask of `inputs` (when it is the only tensor argument).
        cache: None, or the tuple from `initial_cache` (or a previous cached call).
        cache_index: int or int scalar tensor; required with `cache`.
        training: enables dropout.
        return_attention_scores: also return every block's attention weights. Without them
            the attention layers may take their fused path (see `MultiHeadAttention`).

    Returns:
        `outputs` `(batch, T, d)`; `(outputs, scores)` with `return_attention_scores=True`; with a
        cache `(outputs, cache)` or `(outputs, scores, cache)`. `scores` is a dict:
        `"self_attention"` `(batch, num_layers, heads, T, T or S)` and, with cross-attention,
        `"cross_attention"` `(batch, num_layers, heads, T, T_x)`.

    Example:

    >>> import numpy as np
    >>> gpt = TransformerDecoder(2, num_heads=2, intermediate_dim=16, cross_attention=False,
    ...                          normalize_first=True, activation="gelu")
    >>> x = np.random.rand(1, 4, 8).astype("float32")
    >>> full = gpt(x)
    >>> cache = gpt.initial_cache(1, 4)
    >>> prompt, cache = gpt(x[:, :3], cache=cache, cache_index=0)
    >>> last, cache = gpt(x[:, 3:], cache=cache, cache_index=3)
    >>> bool(np.allclose(np.concatenate([prompt, last], 1), full, atol=1e-5))
    True

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762.
        Radford et al., 2018, "Improving Language Understanding by Generative Pre-Training"
        (GPT).
    """

    def __init__(
        self,
        num_layers: int,
        num_heads: int,
        intermediate_dim: int,
        cross_attention: bool = True,
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
        self.cross_attention = bool(cross_attention)

    def build(self, inputs_shape, memory_shape=None):
        self.blocks = []
        for index in range(self.num_layers):
            block = TransformerDecoderBlock(
                **self._block_arguments(),
                cross_attention=self.cross_attention,
                dtype=self.dtype_policy,
                name=f"block_{index}",
            )
            block.build(inputs_shape, memory_shape)
            self.blocks.append(block)
        self.final_norm = self._final_norm(inputs_shape)
        self.built = True

    def initial_cache(self, batch_size, max_length, memory=None) -> tuple:
        """One `TransformerDecoderBlock.initial_cache` per layer, as a tuple."""
        if not self.built:
            raise ValueError("Build the decoder (call it once) before asking for its cache.")
        return tuple(block.initial_cache(batch_size, max_length, memory) for block in self.blocks)

    def call(
        self,
        inputs,
        memory=None,
        inputs_mask=None,
        memory_mask=None,
        attention_mask=None,
        mask=None,
        cache=None,
        cache_index=None,
        training=None,
        return_attention_scores=False,
    ):
        if cache is not None and len(cache) != self.num_layers:
            raise ValueError(
                f"Expected a cache with one entry per layer ({self.num_layers}). "
                f"Received: {len(cache)} entries"
            )
        padding = inputs_mask if inputs_mask is not None else mask
        x, scores, new_cache = inputs, [], []
        for index, block in enumerate(self.blocks):
            outputs = block(
                x,
                memory,
                inputs_mask=padding,
                memory_mask=memory_mask,
                attention_mask=attention_mask,
                cache=None if cache is None else cache[index],
                cache_index=cache_index,
                training=training,
                return_attention_scores=return_attention_scores,
            )
            # Scores only when asked: without them the attention may take its fused path.
            if cache is None and not return_attention_scores:
                outputs = (outputs,)
            x = outputs[0]
            if return_attention_scores:
                scores.append(outputs[1])
            if cache is not None:
                new_cache.append(outputs[-1])
        if self.final_norm is not None:
            x = self.final_norm(x)
        result = (x,)
        if return_attention_scores:
            stacked = {
                name: ops.stack([block_scores[name] for block_scores in scores], axis=1)
                for name in scores[0]
            }
            result = (x, stacked)
        if cache is not None:
            return (*result, tuple(new_cache))
        return result if return_attention_scores else x

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers, cross_attention=self.cross_attention)
        return config
