"""Multi-dimensional (feature-wise) attention, DiSAN's source2token and query-conditioned forms."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn import ops as attn_ops
from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.mask_passthrough import PooledOutputMask
from keras_attn.ops.masking import apply_query_mask


@keras_attn_export("keras_attn.layers.MultiDimensionalAttention")
class MultiDimensionalAttention(PooledOutputMask, keras.layers.Layer):
    """Multi-dimensional attention: one distribution over the tokens per feature.

    Source2token (no query): for tokens `x_i` `(batch, T, d)`, every token gets a score vector
    with one entry per feature,

        f(x_i) = W_2 act(W_1 x_i + b_1) + b_2                (batch, T, d)
        alpha_k = softmax_i(f(x_i)_k), for each feature k    (batch, d, T)
        s = sum_i alpha_{., i} * x_i                          (batch, d)

    so feature `k` of the output is a convex combination of feature `k` of the tokens.

    Query-conditioned (DiSAN's `f(x_i, q)`, its token2token form when the queries are the tokens
    themselves): for queries `q_t` `(batch, T_q, d_q)`,

        f(x_i, q_t) = W_2 act(W_1 x_i + W_q q_t + b_1) + b_2   (batch, T_q, T, d)
        alpha_tk = softmax_i(f(x_i, q_t)_k)                    (batch, T_q, d, T)
        s_t = sum_i alpha_{t, ., i} * x_i                       (batch, T_q, d)

    `W_q` `(d_q, units)` is created when the layer is first built with a query; such a layer
    still accepts calls without one (the `W_q q_t` term is then absent). The softmax is taken in
    float32 over the real (unmasked) tokens only.

    The weights are laid out `(..., d, T)`, not `(..., T, d)`: as for every attention layer in
    keras_attn, the last axis is the axis the distribution runs over (here the tokens), so
    `weights.sum(-1)` is one for every feature.

    Args:
        units: size of the hidden layer `W_1` `(d, units)`.
        activation: the hidden activation, a Keras activation name or function (DiSAN uses
            `"elu"`).
        kernel_initializer: initializer of `W_1`, `W_q` and `W_2`.

    Call arguments:
        inputs: `(batch, T, d)`.
        query: optional `(batch, T_q, d_q)`; see the query-conditioned form above.
        mask: bool `(batch, T)`, True at real tokens; filled from Keras masking. Padded tokens get
            exactly zero weight in every feature; a fully padded row gives zero weights and a zero
            output.
        inputs_mask: the same token mask under the name Keras fills from Keras masking when a
            query is passed as well (with several tensor arguments Keras fills
            `<argument>_mask`); used when `mask` is None.
        query_mask: bool `(batch, T_q)`; padded queries get a zero output. Filled from Keras
            masking. The output carries no Keras mask (pass `query_mask` on by hand).
        return_attention_scores: also return the weights.

    Returns:
        `pooled` `(batch, d)`, or `(pooled, weights)` with `weights` `(batch, d, T)` when
        `return_attention_scores=True`; with a query, `pooled` `(batch, T_q, d)` and `weights`
        `(batch, T_q, d, T)`.

    Example:

    >>> import numpy as np
    >>> layer = MultiDimensionalAttention(8)
    >>> pooled, weights = layer(np.ones((2, 5, 4), "float32"), return_attention_scores=True)
    >>> tuple(pooled.shape), tuple(weights.shape)
    ((2, 4), (2, 4, 5))
    >>> conditioned = MultiDimensionalAttention(8)
    >>> query = np.ones((2, 3, 6), "float32")
    >>> pooled, weights = conditioned(
    ...     np.ones((2, 5, 4), "float32"), query=query, return_attention_scores=True
    ... )
    >>> tuple(pooled.shape), tuple(weights.shape)
    ((2, 3, 4), (2, 3, 4, 5))

    References:
        Shen, Zhou, Long, Jiang, Pan and Zhang, 2018, "DiSAN: Directional Self-Attention Network
        for RNN/CNN-Free Language Understanding", AAAI, arXiv:1709.04696, section 3
        (multi-dimensional attention `f(x_i, q) = W^T sigma(W^(1) x_i + W^(2) q + b^(1)) + b`,
        its token2token and source2token forms).
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

    def build(self, inputs_shape, query_shape=None):
        depth = inputs_shape[-1]
        self.hidden_kernel = self.add_weight(
            name="hidden_kernel",
            shape=(depth, self.units),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.query_kernel = None
        if query_shape is not None:
            self.query_kernel = self.add_weight(
                name="query_kernel",
                shape=(query_shape[-1], self.units),
                initializer=clone_initializer(self.kernel_initializer),
            )
        self.hidden_bias = self.add_weight(
            name="hidden_bias", shape=(self.units,), initializer="zeros"
        )
        self.score_kernel = self.add_weight(
            name="score_kernel",
            shape=(self.units, depth),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.score_bias = self.add_weight(name="score_bias", shape=(depth,), initializer="zeros")
        self.built = True

    def call(
        self,
        inputs,
        query=None,
        mask=None,
        inputs_mask=None,
        query_mask=None,
        return_attention_scores=False,
    ):
        mask = inputs_mask if mask is None else mask
        # (batch, T, d) x (d, units) -> (batch, T, units)
        hidden = ops.einsum("btd,du->btu", inputs, self.hidden_kernel) + self.hidden_bias
        if query is None:
            # (batch, T, units) x (units, d) -> (batch, d, T): one score row per feature
            scores = ops.einsum("btu,ud->bdt", self.activation_fn(hidden), self.score_kernel)
            keep = None if mask is None else ops.expand_dims(ops.cast(mask, "bool"), 1)
        else:
            if self.query_kernel is None:
                raise ValueError(
                    "This MultiDimensionalAttention was built without a query, so it has no "
                    "query kernel W_q; call it with a query the first time to create one."
                )
            # (batch, T_q, d_q) x (d_q, units) -> (batch, T_q, 1, units), broadcast over tokens
            conditioned = ops.einsum("bqe,eu->bqu", query, self.query_kernel)
            hidden = ops.expand_dims(hidden, 1) + ops.expand_dims(conditioned, 2)
            # (batch, T_q, T, units) x (units, d) -> (batch, T_q, d, T)
            scores = ops.einsum("bqtu,ud->bqdt", self.activation_fn(hidden), self.score_kernel)
            keep = None if mask is None else ops.cast(mask, "bool")[:, None, None, :]
        scores = scores + ops.expand_dims(self.score_bias, -1)
        weights = attn_ops.softmax(scores, mask=keep, axis=-1)
        if query is None:
            # (batch, d, T) * (batch, T, d) -> (batch, d), feature by feature
            pooled = ops.einsum("bdt,btd->bd", weights, inputs)
        else:
            # (batch, T_q, d, T) * (batch, T, d) -> (batch, T_q, d)
            pooled = apply_query_mask(ops.einsum("bqdt,btd->bqd", weights, inputs), query_mask)
        if return_attention_scores:
            return pooled, weights
        return pooled

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(self, "units", "kernel_initializer"),
            activation=keras.activations.serialize(self.activation_fn),
        )
        return config
