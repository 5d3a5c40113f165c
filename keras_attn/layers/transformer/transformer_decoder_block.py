"""One Transformer decoder layer: causal self-attention, cross-attention, feed-forward network."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.transformer._base import TransformerLayer
from keras_attn.ops.slots import write_slots


@keras_attn_export("keras_attn.layers.TransformerDecoderBlock")
class TransformerDecoderBlock(TransformerLayer):
    """Transformer decoder layer (Vaswani et al., 2017, section 3.1).

    Post-LN, as in the paper (`normalize_first=False`, default), for the decoder input `X`
    `(batch, T, d)` and the encoder output `enc_out` `(batch, T_x, d_x)`:

        mha_1  = MHA(X, X, X), causal               position t sees positions <= t only
        norm_1 = LN(X + Dropout(mha_1))
        mha_2  = MHA(query=norm_1, key=value=enc_out)
        norm_2 = LN(norm_1 + Dropout(mha_2))
        f      = FFN(norm_2)
        out    = LN(norm_2 + Dropout(f))            (batch, T, d)

    The cross-attention takes its query from the decoder (`norm_1`) and its keys and values from
    `enc_out`; its residual adds `norm_1`.

    Pre-LN (`normalize_first=True`): each sublayer is `h + Dropout(sublayer(LN(h)))`; a pre-LN
    stack needs a final LayerNorm (`TransformerDecoder` adds it). With `cross_attention=False`
    the block has no `mha_2`: a GPT block (decoder-only language model).

    Incremental decoding. `initial_cache(batch_size, max_length, memory)` returns the cache, a
    dict of `(batch, heads, S, d / heads)` tensors:

        "self_key", "self_value"     zeros, S = max_length; step t writes position t
        "cross_key", "cross_value"   the projected `memory` (S = T_x), computed once
                                     (only with cross_attention)

    Then `block(x_t, cache=cache, cache_index=t, memory_mask=...)` with `x_t` `(batch, T_new, d)`
    (one step, or a prompt at `cache_index=0`) returns `(outputs, cache)` with the keys and values
    of the new positions written at `t .. t + T_new - 1`; the cross-attention reads the cached
    projection of `memory`, so `memory` is not passed again. Token-by-token outputs equal the
    full causal pass. In a cached call `inputs_mask` (or the Keras mask of `x_t`) covers the
    `T_new` new positions: padded new positions get a zero output and, as keys at cache slots
    `t .. t + T_new - 1`, zero weight, so a padded multi-token call equals the full pass. Keys
    already in the cache are masked by `attention_mask` `(batch, T_new, S)` if needed (the causal
    mask hides positions not written yet).

    Args:
        num_heads: attention heads `h`; must divide `d`.
        intermediate_dim: width of the feed-forward hidden layer (`d_ff`).
        cross_attention: whether the block attends to an encoder output (`memory`).
        dropout: residual dropout on each sublayer's output.
        attention_dropout: dropout on the attention weights.
        activation: feed-forward activation (`"relu"` as in the paper, `"gelu"` for GPT).
        normalize_first: pre-LN instead of post-LN.
        layer_norm_epsilon: epsilon of the LayerNorms.
        kernel_initializer: initializer of every kernel.
        bias_initializer: initializer of every bias.

    Call arguments:
        inputs: `(batch, T, d)`.
        memory: encoder output `(batch, T_x, d_x)`; required with `cross_attention` unless the
            cache holds its projection; must be None without `cross_attention`.
        inputs_mask: bool `(batch, T)`, True at real decoder positions. Filled from Keras masking
            when not given (as `inputs_mask`, or as `mask` when `inputs` is the only tensor).
        memory_mask: bool `(batch, T_x)`, True at real encoder positions: padded ones get exactly
            zero cross-attention weight. Filled from `memory`'s Keras mask when not given.
        attention_mask: bool `(batch, T, T)` (`(batch, T, S)` with a cache), extra self-attention
            mask combined with the causal one.
        mask: the Keras mask of `inputs` (see `inputs_mask`).
        cache: None, or the dict described above.
        cache_index: int or int scalar tensor, where the new positions go; required with `cache`.
        training: enables dropout.
        return_attention_scores: also return the attention weights. Without them the
            attention layers may take their fused path (see `MultiHeadAttention`).

    Returns:
        A fixed structure: `outputs` `(batch, T, d)`; with `return_attention_scores=True`
        `(outputs, scores)`; with a cache `(outputs, cache)` or `(outputs, scores, cache)`.
        `scores` is a dict: `"self_attention"` `(batch, heads, T, T)` (`(.., T, S)` with a
        cache) and, with cross-attention, `"cross_attention"` `(batch, heads, T, T_x)`.

    Example:

    >>> import numpy as np
    >>> block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    >>> x = np.random.rand(2, 4, 8).astype("float32")
    >>> memory = np.random.rand(2, 6, 8).astype("float32")
    >>> y, scores = block(x, memory, return_attention_scores=True)
    >>> tuple(y.shape), tuple(scores["cross_attention"].shape)
    ((2, 4, 8), (2, 2, 4, 6))
    >>> float(np.abs(np.triu(scores["self_attention"], 1)).max())  # nothing from the future
    0.0
    >>> cache = block.initial_cache(2, 4, memory)
    >>> steps = []
    >>> for t in range(4):
    ...     y_t, cache = block(x[:, t : t + 1], cache=cache, cache_index=t)
    ...     steps.append(y_t)
    >>> bool(np.allclose(np.concatenate(steps, axis=1), y, atol=1e-5))
    True

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762.
        Xiong et al., 2020, "On Layer Normalization in the Transformer Architecture",
        arXiv:2002.04745.
    """

    def __init__(
        self,
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
        self.cross_attention = bool(cross_attention)

    def build(self, inputs_shape, memory_shape=None):
        self.head_dim = self._check_model_dim(inputs_shape) // self.num_heads
        self.self_attention = self._attention("self_attention", inputs_shape, inputs_shape)
        self.self_attention_norm = self._layer_norm("self_attention_norm", inputs_shape)
        if self.cross_attention:
            # Built without memory (e.g. first called with a cache): memory as wide as the decoder.
            self.cross_attention_layer = self._attention(
                "cross_attention", inputs_shape, memory_shape or inputs_shape
            )
            self.cross_attention_norm = self._layer_norm("cross_attention_norm", inputs_shape)
        self.feed_forward = self._feed_forward(inputs_shape)
        self.feed_forward_norm = self._layer_norm("feed_forward_norm", inputs_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def initial_cache(self, batch_size, max_length, memory=None) -> dict:
        """The cache before the first step: zero self-attention keys/values for `max_length`
        positions and, with cross-attention, the keys/values of `memory` `(batch, T_x, d_x)`.

        The block must be built (called once, or `build()`).
        """
        if not self.built:
            raise ValueError("Build the block (call it once) before asking for its cache.")
        shape = (batch_size, self.num_heads, max_length, self.head_dim)
        zeros = ops.zeros(shape, self.compute_dtype)
        cache = {"self_key": zeros, "self_value": zeros}
        if self.cross_attention:
            if memory is None:
                raise ValueError("A block with cross_attention needs `memory` for its cache.")
            cache.update(self.memory_cache(memory))
        elif memory is not None:
            raise ValueError("This block has cross_attention=False; it takes no `memory`.")
        return cache

    def memory_cache(self, memory) -> dict:
        """`{"cross_key", "cross_value"}`: `memory` projected by the cross-attention's key and
        value maps, `(batch, heads, T_x, d / heads)` each; computed once per source."""
        keys, values = self.cross_attention_layer.project_key_value(ops.convert_to_tensor(memory))
        return {"cross_key": keys, "cross_value": values}

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
        self._check_call(memory, cache, cache_index)
        padding = inputs_mask if inputs_mask is not None else mask
        cached = cache is not None
        new_cache = {}

        # The weights are asked for only when returned: without them the attention layers may
        # take their fused path. `_with_weights` gives `(output, weights or None)` either way.
        def self_attend(h):
            kwargs = dict(
                query_mask=padding,
                attention_mask=attention_mask,
                use_causal_mask=True,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            if not cached:
                outputs = self.self_attention(h, h, value_mask=padding, **kwargs)
                return _with_weights(outputs, return_attention_scores)
            # The keys span the S cache slots, the padding only the new ones: widen it to (batch,
            # S) explicitly (left to Keras, `h`'s mask would be taken as a (batch, T_new) key mask).
            *outputs, (keys, values) = self.self_attention(
                h,
                h,
                value_mask=_cache_key_mask(padding, cache_index, ops.shape(cache["self_key"])[2]),
                cache=(cache["self_key"], cache["self_value"]),
                cache_update_index=cache_index,
                **kwargs,
            )
            new_cache.update(self_key=keys, self_value=values)
            return _with_weights(tuple(outputs), return_attention_scores)

        x, self_weights = self._sublayer(inputs, self_attend, self.self_attention_norm, training)
        scores = {"self_attention": self_weights}

        if self.cross_attention:

            def cross_attend(h):
                attention = self.cross_attention_layer
                if memory is not None:
                    outputs = attention(
                        h,
                        memory,
                        query_mask=padding,
                        value_mask=memory_mask,
                        return_attention_scores=return_attention_scores,
                        training=training,
                    )
                    return _with_weights(outputs, return_attention_scores)
                # The cache holds the projected memory: attend to it directly.
                keys, values = cache["cross_key"], cache["cross_value"]
                new_cache.update(cross_key=keys, cross_value=values)
                return attention.compute_attention(
                    attention.project_query(h),
                    keys,
                    values,
                    query_mask=padding,
                    value_mask=memory_mask,
                    training=training,
                    return_attention_scores=return_attention_scores,
                )

            x, cross_weights = self._sublayer(x, cross_attend, self.cross_attention_norm, training)
            scores["cross_attention"] = cross_weights

        x = self._feed_forward_sublayer(x, training)
        result = (x, scores) if return_attention_scores else (x,)
        if cached:
            return (*result, new_cache)
        return result if return_attention_scores else x

    def _check_call(self, memory, cache, cache_index):
        if cache is not None and cache_index is None:
            raise ValueError("`cache_index` is required when `cache` is given.")
        if not self.cross_attention:
            if memory is not None:
                raise ValueError("This block has cross_attention=False; it takes no `memory`.")
            return
        if cache is not None and memory is not None:
            raise ValueError(
                "With a cache the cross-attention reads the projected memory from "
                "cache['cross_key'] / cache['cross_value']; pass memory=None."
            )
        if cache is None and memory is None:
            raise ValueError(
                "This block has cross_attention=True: pass `memory` (the encoder output), or "
                "build a decoder-only block with cross_attention=False."
            )

    def get_config(self):
        config = super().get_config()
        config.update(cross_attention=self.cross_attention)
        return config


def _with_weights(outputs, with_weights: bool):
    """`(output, weights)` from an attention call's result, `(output, None)` without weights."""
    if with_weights:
        return outputs
    return (outputs[0] if isinstance(outputs, (tuple, list)) else outputs), None


def _cache_key_mask(padding, cache_index, cache_length):
    """Bool `(batch, S)`: `padding` `(batch, T_new)` at cache slots `cache_index ..
    cache_index + T_new - 1`, True at every other slot; None without padding."""
    if padding is None:
        return None
    padding = ops.cast(padding, "int32")
    slots = ops.ones((ops.shape(padding)[0], cache_length), "int32")
    return ops.cast(write_slots(slots, padding, cache_index, axis=1), "bool")
