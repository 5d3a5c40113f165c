"""Multi-head scaled dot-product attention with fused projections and an optional KV cache."""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import check_positive_int, serialize_arguments
from keras_attn.layers.mask_passthrough import FirstInputMaskPassthrough
from keras_attn.ops.distributions import softmax
from keras_attn.ops.fused_attention import dot_product_attention, fused_attention_by_default
from keras_attn.ops.masking import apply_query_mask, merge_masks
from keras_attn.ops.shapes import dimension, leading_shape
from keras_attn.ops.slots import slot_coordinates, write_slots


@keras_attn_export("keras_attn.layers.MultiHeadAttention")
class MultiHeadAttention(FirstInputMaskPassthrough, keras.layers.Layer):
    """Multi-head scaled dot-product attention (Vaswani et al., 2017, section 3.2.2).

    For every head `i` (shapes for one batch element):

        Q_i = E_Q W_i^Q + b_i^Q      (T_q, key_dim)      W_i^Q: (d_q, key_dim)
        K_i = E_K W_i^K + b_i^K      (T_k, key_dim)      W_i^K: (d_k, key_dim)
        V_i = E_V W_i^V + b_i^V      (T_k, value_dim)    W_i^V: (d_v, value_dim)
        A_i = softmax(Q_i K_i^T / sqrt(key_dim))         (T_q, T_k), masked positions get 0
        H_i = A_i V_i                                    (T_q, value_dim)
        out = concat_i(H_i) W^O + b^O                    (T_q, d_out)

    Projections are fused: when `query`, `value` and `key` are the same tensor (self-attention) one
    einsum computes Q, K and V; when only `key` is `value` one einsum computes K and V. The weights
    are kept per projection (`query_kernel` `(d_q, heads, key_dim)`, `key_kernel`, `value_kernel`
    `(d_v, heads, value_dim)`, `output_kernel` `(heads, value_dim, d_out)` and their biases), the
    layout of `keras.layers.MultiHeadAttention`'s `EinsumDense` sublayers, so weights map one to
    one. The softmax is taken in float32 (`keras_attn.ops.softmax`).

    Fused path: when the heads' values are as wide as their keys (`value_dim` None or `key_dim`),
    the weights are not returned and no dropout is active (`dropout=0`, or not training),
    `A_i V_i` can be computed by one call of `keras.ops.dot_product_attention`
    (`keras_attn.ops.dot_product_attention`), which is flash attention (Dao et al., 2022) where
    the backend and device have a kernel for it. `use_fused_attention=None` takes it on JAX and
    PyTorch and keeps the explicit softmax on TensorFlow, where the fused op has no flash kernel
    and is not faster; `True` takes it on every backend, `False` never. Both paths compute the
    same function (masks, causal mask, cache offsets; logits and softmax in float32; a query row
    with every key masked gets a zero `H_i`); asking for the weights
    (`return_attention_scores=True`) always takes the explicit path.

    Incremental decoding: pass `cache=(key_cache, value_cache)` with shapes
    `(batch, heads, S, key_dim)` and `(batch, heads, S, value_dim)` (zeros to start) and
    `cache_update_index=i`. The keys and values of the `T_q` new positions are written into the
    caches at positions `i .. i + T_q - 1`, and the queries attend over all `S` cache positions.
    With `use_causal_mask=True` the query at position `i + t` sees cache positions `<= i + t`,
    which also hides the not yet written part of the cache; `value_mask` and `attention_mask` then
    describe the `S` cache positions.

    Building blocks for callers that keep projected tensors themselves (e.g. a decoder that
    projects the encoder output once per source sentence): `project_query`, `project_key_value`
    and `compute_attention`; `call` is `compute_attention(project_query(query),
    *project_key_value(value, key))` with the causal mask and the cache update in between.

    Args:
        num_heads: number of heads `h`.
        key_dim: size of each head's queries and keys.
        value_dim: size of each head's values; defaults to `key_dim`.
        dropout: dropout rate on the attention weights during training.
        use_bias: whether the four projections have biases.
        output_shape: size `d_out` of the output's last axis; defaults to the query's last axis.
        kernel_initializer: initializer of the four kernels.
        bias_initializer: initializer of the four biases.
        use_fused_attention: None (automatic: the fused path on JAX and PyTorch), True or False;
            see "Fused path" above. The fused path is only taken where it applies.

    Call arguments:
        query: `(batch, T_q, d_q)`.
        value: `(batch, T_k, d_v)`.
        key: `(batch, T_k, d_k)`; defaults to `value`.
        query_mask: bool `(batch, T_q)`; padded queries get a zero output. Filled from Keras
            masking when not given.
        value_mask: bool `(batch, T_k)`; padded keys get exactly zero weight. Filled from Keras
            masking when not given.
        attention_mask: bool `(batch, T_q, T_k)`, True where attention is allowed.
        use_causal_mask: query `t` attends only to keys `<= t` (offset by `cache_update_index`
            when a cache is given).
        return_attention_scores: also return the weights `(batch, heads, T_q, T_k)`.
        training: enables dropout.
        cache: None, or `(key_cache, value_cache)` as described above.
        cache_update_index: int (or int scalar tensor) position at which the new keys and values
            are written; required with `cache`.

    Returns:
        Without a cache: `output` `(batch, T_q, d_out)`, or `(output, weights)` when
        `return_attention_scores=True`. With a cache: `(output, cache)`, or
        `(output, weights, cache)`, where `cache` is the updated `(key_cache, value_cache)`.

    Example:

    >>> import numpy as np
    >>> layer = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = np.random.rand(2, 3, 8).astype("float32")
    >>> output, weights = layer(x, x, return_attention_scores=True)
    >>> tuple(output.shape), tuple(weights.shape)
    ((2, 3, 8), (2, 2, 3, 3))
    >>> cache = (np.zeros((2, 2, 5, 4), "float32"), np.zeros((2, 2, 5, 4), "float32"))
    >>> step, cache = layer(x[:, :1], x[:, :1], use_causal_mask=True, cache=cache,
    ...                     cache_update_index=0)
    >>> tuple(step.shape), tuple(cache[0].shape)
    ((2, 1, 8), (2, 2, 5, 4))

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762.
        Dao et al., 2022, "FlashAttention: Fast and Memory-Efficient Exact Attention with
        IO-Awareness", arXiv:2205.14135.
    """

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        value_dim: int | None = None,
        dropout: float = 0.0,
        use_bias: bool = True,
        output_shape: int | None = None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        use_fused_attention: bool | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        if value_dim is not None:
            check_positive_int("value_dim", value_dim)
        if output_shape is not None:
            check_positive_int("output_shape", output_shape)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"Expected dropout in [0, 1). Received: dropout={dropout!r}")
        if use_fused_attention is not None and not isinstance(use_fused_attention, bool):
            raise ValueError(
                "Expected use_fused_attention in {None, True, False}. "
                f"Received: use_fused_attention={use_fused_attention!r}"
            )
        self.num_heads = int(num_heads)
        self.key_dim = int(key_dim)
        self.value_dim = None if value_dim is None else int(value_dim)
        self.dropout = float(dropout)
        self.use_bias = bool(use_bias)
        self._output_shape = None if output_shape is None else int(output_shape)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.use_fused_attention = use_fused_attention
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.supports_masking = True

    @property
    def output_shape(self) -> int | None:
        """The configured size of the output's last axis (None = the query's)."""
        return self._output_shape

    @property
    def head_value_dim(self) -> int:
        """Size of each head's values (`value_dim`, or `key_dim` when not given)."""
        return self.key_dim if self.value_dim is None else self.value_dim

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        heads, dk, dv = self.num_heads, self.key_dim, self.head_value_dim
        d_out = self._output_shape or query_shape[-1]
        self.query_kernel = self._kernel("query_kernel", (query_shape[-1], heads, dk))
        self.key_kernel = self._kernel("key_kernel", (key_shape[-1], heads, dk))
        self.value_kernel = self._kernel("value_kernel", (value_shape[-1], heads, dv))
        self.output_kernel = self._kernel("output_kernel", (heads, dv, d_out))
        if self.use_bias:
            self.query_bias = self._bias("query_bias", (heads, dk))
            self.key_bias = self._bias("key_bias", (heads, dk))
            self.value_bias = self._bias("value_bias", (heads, dv))
            self.output_bias = self._bias("output_bias", (d_out,))
        self.built = True

    def _kernel(self, name, shape):
        return self.add_weight(
            name=name, shape=shape, initializer=clone_initializer(self.kernel_initializer)
        )

    def _bias(self, name, shape):
        return self.add_weight(
            name=name, shape=shape, initializer=clone_initializer(self.bias_initializer)
        )

    def _project(self, x, kernels, biases, heads_first: bool = True):
        """Several projections of `x` in one matmul: `(b, T, d)` -> list of `(b, heads, T, e)`,
        or of `(b, T, heads, e)` with `heads_first=False` (the fused op's layout).

        A plain 2-D matmul with a flat bias (and one transpose to the heads-first layout) is the
        cheapest form on CPU: an einsum straight into `bhte` transposes inside every call and
        reduces the bias gradient over non-contiguous axes. Computed in the compute dtype, also
        when called outside `__call__` (where Keras does not cast the weights).
        """
        x = ops.cast(x, self.compute_dtype)
        kernel = kernels[0] if len(kernels) == 1 else ops.concatenate(kernels, axis=-1)
        kernel = ops.cast(kernel, self.compute_dtype)
        width, heads, size = kernel.shape  # size = sum of the projections' e
        batch, length = leading_shape(x, 1)  # static sizes read no shape at run time
        flat = ops.matmul(ops.reshape(x, (-1, width)), ops.reshape(kernel, (width, heads * size)))
        if self.use_bias:
            bias = biases[0] if len(biases) == 1 else ops.concatenate(biases, axis=-1)
            flat = flat + ops.reshape(ops.cast(bias, self.compute_dtype), (heads * size,))
        projected = ops.reshape(flat, (batch, length, heads, size))
        if heads_first:
            projected = ops.transpose(projected, (0, 2, 1, 3))  # (batch, heads, T, size)
        if len(kernels) == 1:
            return [projected]
        sizes = [k.shape[-1] for k in kernels]
        splits = [sum(sizes[: i + 1]) for i in range(len(sizes) - 1)]
        return ops.split(projected, splits, axis=-1)

    def _biases(self):
        """The query, key and value biases, or Nones without biases."""
        if self.use_bias:
            return self.query_bias, self.key_bias, self.value_bias
        return None, None, None

    def _projections(self, query, value, key, heads_first: bool = True):
        """Q, K, V `(batch, heads, T, e)` (`(batch, T, heads, e)` unless `heads_first`); one fused
        matmul for self-attention (`query is value`, no `key`)."""
        kernels = [self.query_kernel, self.key_kernel, self.value_kernel]
        biases = self._biases()
        if key is None and query is value:
            return self._project(query, kernels, biases, heads_first)
        (q,) = self._project(query, kernels[:1], biases[:1], heads_first)
        if key is None:
            k, v = self._project(value, kernels[1:], biases[1:], heads_first)
        else:
            (k,) = self._project(key, kernels[1:2], biases[1:2], heads_first)
            (v,) = self._project(value, kernels[2:], biases[2:], heads_first)
        return q, k, v

    def project_query(self, query):
        """The heads' queries `Q_i = E_Q W_i^Q + b_i^Q`: `(batch, T_q, d_q)` ->
        `(batch, heads, T_q, key_dim)`, in the compute dtype. The layer must be built."""
        (projected,) = self._project(query, [self.query_kernel], self._biases()[:1])
        return projected

    def project_key_value(self, value, key=None):
        """The heads' keys and values, `(batch, heads, T_k, key_dim)` and
        `(batch, heads, T_k, value_dim)`.

        `value` `(batch, T_k, d_v)`; `key` `(batch, T_k, d_k)` defaults to `value` (then both
        projections are one matmul). A caller that attends to the same memory many times (cached
        cross-attention) projects it once here and passes the result to `compute_attention`.
        Computed in the compute dtype; the layer must be built.
        """
        _, key_bias, value_bias = self._biases()
        if key is None:
            keys, values = self._project(
                value, [self.key_kernel, self.value_kernel], [key_bias, value_bias]
            )
            return keys, values
        (keys,) = self._project(key, [self.key_kernel], [key_bias])
        (values,) = self._project(value, [self.value_kernel], [value_bias])
        return keys, values

    def uses_fused_attention(self, return_attention_scores: bool = False, training=None) -> bool:
        """Whether a call with these arguments takes the fused path (see the class docstring).

        The fused path applies when `value_dim` equals `key_dim` (or is None), the weights are
        not returned and no dropout is active; it is
        taken where it applies if `use_fused_attention` is True, or if it is None and the backend
        is JAX or PyTorch (`keras_attn.ops.fused_attention_by_default()`).
        """
        if (
            self.head_value_dim != self.key_dim  # the fused op needs equal widths
            or return_attention_scores
            or (self.dropout > 0.0 and bool(training))
        ):
            return False
        if self.use_fused_attention is None:
            return fused_attention_by_default()
        return self.use_fused_attention

    def compute_attention(
        self,
        query,
        key,
        value,
        query_mask=None,
        value_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores: bool = True,
    ):
        """Scaled dot-product attention of projected tensors and the output projection.

        Args:
            query: projected queries `(batch, heads, T_q, key_dim)` (`project_query`).
            key: projected keys `(batch, heads, T_k, key_dim)` (`project_key_value`).
            value: projected values `(batch, heads, T_k, value_dim)`.
            query_mask: bool `(batch, T_q)`; padded queries get a zero output.
            value_mask: bool `(batch, T_k)`; padded keys get exactly zero weight.
            attention_mask: bool `(batch, T_q, T_k)` (or broadcastable), True where allowed.
            training: enables dropout on the weights.
            return_attention_scores: whether the weights are needed; without them the fused path
                may be taken (`uses_fused_attention`).

        Returns:
            `(output, weights)`: `output` `(batch, T_q, d_out)`, `weights`
            `(batch, heads, T_q, T_k)` before dropout, or None when
            `return_attention_scores=False`.
        """
        if self.uses_fused_attention(return_attention_scores, training):
            # (batch, heads, T, e) -> (batch, T, heads, e), the fused op's layout
            query, key, value = (ops.transpose(t, (0, 2, 1, 3)) for t in (query, key, value))
            return self._attend(query, key, value, query_mask, value_mask, attention_mask), None
        return self._attend(
            query, key, value, query_mask, value_mask, attention_mask, training, explicit=True
        )

    def _attend(
        self,
        query,
        key,
        value,
        query_mask,
        value_mask,
        attention_mask,
        training=None,
        explicit: bool = False,
    ):
        """The attention and the output projection: `output` with the fused op (inputs
        `(batch, T, heads, e)`), or `(output, weights)` with the explicit softmax (`explicit=True`,
        inputs `(batch, heads, T, e)`)."""
        mask = merge_masks(value_mask=value_mask, attention_mask=attention_mask)
        if mask is not None:
            mask = ops.expand_dims(mask, 1)  # broadcast over heads
        scale = 1.0 / math.sqrt(self.key_dim)
        if explicit:
            query = query * ops.cast(scale, query.dtype)
            scores = ops.einsum("bhqe,bhke->bhqk", query, key)  # (batch, heads, T_q, T_k)
            weights = softmax(scores, mask=mask)  # float32 inside, compute dtype out
            dropped = self.dropout_layer(weights, training=training)
            context = ops.einsum("bhqk,bhke->bqhe", dropped, value)  # (batch, T_q, heads, dv)
        else:
            context = dot_product_attention(query, key, value, mask=mask, scale=scale)
        output_kernel = ops.cast(self.output_kernel, self.compute_dtype)
        output = ops.einsum("bqhe,heo->bqo", context, output_kernel)
        if self.use_bias:
            output = output + ops.cast(self.output_bias, self.compute_dtype)
        output = apply_query_mask(output, query_mask)
        return (output, weights) if explicit else output

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        cache=None,
        cache_update_index=None,
    ):
        if key is value:
            key = None
        fused = self.uses_fused_attention(return_attention_scores, training)
        # Without a cache the fused op's (batch, T, heads, e) layout is projected directly.
        heads_first = cache is not None or not fused
        q, k, v = self._projections(query, value, key, heads_first)  # (batch, heads, T, e)
        if cache is not None:
            if cache_update_index is None:
                raise ValueError("`cache_update_index` is required when `cache` is given.")
            key_cache, value_cache = cache
            where = slot_coordinates(k, cache_update_index, axis=2)  # shared by K and V
            k = write_slots(key_cache, k, cache_update_index, 2, where)  # (batch, heads, S, dk)
            v = write_slots(value_cache, v, cache_update_index, 2, where)
            cache = (k, v)
        if attention_mask is not None:
            attention_mask = ops.cast(attention_mask, "bool")
        if use_causal_mask:
            offset = 0 if cache is None else cache_update_index
            time_axis = 2 if heads_first else 1
            causal = _causal_mask(dimension(q, time_axis), dimension(k, time_axis), offset)
            attention_mask = (
                causal if attention_mask is None else ops.logical_and(attention_mask, causal)
            )
        if heads_first:
            output, weights = self.compute_attention(
                q, k, v, query_mask, value_mask, attention_mask, training, return_attention_scores
            )
        else:
            output = self._attend(q, k, v, query_mask, value_mask, attention_mask)
            weights = None
        result = (output, weights) if return_attention_scores else (output,)
        if cache is not None:
            return (*result, cache)
        return result if return_attention_scores else output

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self,
                "num_heads",
                "key_dim",
                "value_dim",
                "dropout",
                "use_bias",
                "kernel_initializer",
                "bias_initializer",
                "use_fused_attention",
            ),
            output_shape=self._output_shape,
        )
        return config


def _causal_mask(query_length, key_length, offset):
    """Bool `(1, T_q, T_k)`: query `t` (at position `offset + t`) sees keys `<= offset + t`."""
    rows = ops.expand_dims(ops.arange(query_length) + offset, -1)  # (T_q, 1)
    cols = ops.expand_dims(ops.arange(key_length), 0)  # (1, T_k)
    return ops.expand_dims(ops.greater_equal(rows, cols), 0)
