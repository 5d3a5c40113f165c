"""Compositional de-attention (CoDA): signed, unnormalised quasi-attention weights."""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.attention.base_attention import BaseAttention
from keras_attn.ops.masking import merge_masks


@keras_attn_export("keras_attn.layers.CompositionalDeAttention")
class CompositionalDeAttention(BaseAttention):
    """Quasi-attention that can add, subtract or ignore values: `out = (tanh(E) * sigmoid(N)) V`.

    With `q = F_E(query)`, `k = F_E(key)` and `q' = F_N(query)`, `k' = F_N(key)`:

        E[b, i, j] = affinity_scale * q_i . k_j                    (batch, T_q, T_k)
        N[b, i, j] = -dissimilarity_scale * ||q'_i - k'_j||_1      (batch, T_q, T_k)
        M = tanh(E) * sigmoid(N)                                   (batch, T_q, T_k)
        out = M V                                                  (batch, T_q, d_v)

    `tanh(E)` in [-1, 1] chooses to add (+1), subtract (-1) or ignore (0) a value; `sigmoid(N)`
    in (0, 1/2] (N <= 0) shrinks the weight of keys far from the query in L1 distance. The
    weights are not normalised: rows need not sum to one and may be negative. The pipeline is
    `BaseAttention`'s with `E` as the scores and `M` as the weights step.

    Centring N (`centre_dissimilarity=True`): as written, `N <= 0`, so `sigmoid(N)` never
    exceeds 1/2 and the gate can only shrink a value to half or less, never pass it whole. With
    the option on, the mean of N over the allowed (query, key) pairs of each example is
    subtracted,

        N_c[b, i, j] = N[b, i, j] - mean_{allowed (i', j')} N[b, i', j']

    so `sigmoid(N_c)` spans (0, 1) around 1/2: keys nearer than average are gated above 1/2,
    farther ones below. Padded queries and keys and pairs excluded by `attention_mask` take no
    part in the mean, so outputs stay independent of padding. Centring shifts N by one constant
    per example: it changes how much of each value passes, never the order of keys within a row.
    The mean is taken over the whole `(T_q, T_k)` matrix of each example; the default is the
    uncentred `N = -beta ||.||_1` of the paper.

    Choices where the paper leaves freedom: `F_E` and `F_N` are the identity when `units` is
    None, else two bias-free linear maps to `units` features (each shared by queries and keys);
    the paper's scale constants default to `affinity_scale = 1 / sqrt(d)` (a dot product of
    unit-variance features then has unit variance, the range where tanh is not saturated) and
    `dissimilarity_scale = 1 / d` (N is then minus the mean absolute feature difference, O(1)
    for any `d`), `d` being the feature size after `F`. E and N, tanh and sigmoid are computed
    in float32; the L1 distance materialises `(batch, T_q, T_k, d)`.

    Args:
        units: feature size of the projections `F_E`, `F_N`, or None for no projection. Either
            way query and key must have the same feature size.
        affinity_scale: alpha, the factor of `E`; None = `1 / sqrt(d)`.
        dissimilarity_scale: beta, the factor of the L1 distance in `N`; None = `1 / d`.
        kernel_initializer: initializer of the projection kernels.
        centre_dissimilarity: subtract from N its mean over the allowed pairs of each example
            (see above); False keeps `N = -beta ||.||_1`.

    Call arguments:
        query: `(batch, T_q, d_q)`.
        value: `(batch, T_k, d_v)`.
        key: `(batch, T_k, d_k)`; defaults to `value`.
        query_mask: bool `(batch, T_q)`; padded queries get a zero output. Filled from Keras
            masking when not given.
        value_mask: bool `(batch, T_k)`; padded keys get exactly zero weight. Filled from Keras
            masking when not given.
        attention_mask: bool `(batch, T_q, T_k)`, True where attention is allowed.
        return_attention_scores: also return the weights `M`.

    Returns:
        `output` `(batch, T_q, d_v)`, or `(output, weights)` with `weights` `(batch, T_q, T_k)` in
        [-1/2, 1/2] (in (-1, 1) with `centre_dissimilarity=True`) when
        `return_attention_scores=True`. Masked positions have weight exactly 0; a
        query with no allowed key gets a zero output.

    Example:

    >>> import numpy as np
    >>> layer = CompositionalDeAttention(units=8)
    >>> q = np.random.rand(2, 3, 4).astype("float32"); k = np.random.rand(2, 5, 4).astype("float32")
    >>> v = np.random.rand(2, 5, 6).astype("float32")
    >>> output, weights = layer(q, v, key=k, return_attention_scores=True)
    >>> tuple(output.shape), tuple(weights.shape)
    ((2, 3, 6), (2, 3, 5))

    References:
        Tay, Luu, Zhang, Wang and Hui, 2019, "Compositional De-Attention Networks", NeurIPS 2019
        (section 2, eqs. for E, N and M).
    """

    def __init__(
        self,
        units: int | None = None,
        affinity_scale: float | None = None,
        dissimilarity_scale: float | None = None,
        kernel_initializer="glorot_uniform",
        centre_dissimilarity: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(centre_dissimilarity, bool):
            raise ValueError(
                "Expected centre_dissimilarity to be a bool. "
                f"Received: centre_dissimilarity={centre_dissimilarity!r}"
            )
        if units is not None and (
            isinstance(units, bool) or not isinstance(units, int) or units < 1
        ):
            raise ValueError(
                f"Expected units to be None or a positive integer. Received: units={units!r}"
            )
        for name, scale in (
            ("affinity_scale", affinity_scale),
            ("dissimilarity_scale", dissimilarity_scale),
        ):
            if scale is not None and (
                isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0
            ):
                raise ValueError(
                    f"Expected {name} to be None or a positive number. Received: {name}={scale!r}"
                )
        self.units = units
        self.affinity_scale = None if affinity_scale is None else float(affinity_scale)
        self.dissimilarity_scale = (
            None if dissimilarity_scale is None else float(dissimilarity_scale)
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.centre_dissimilarity = centre_dissimilarity

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        if query_shape[-1] != key_shape[-1]:
            raise ValueError(
                "Expected query and key (value when no key is given) to have the same feature "
                "size: F_E and F_N are shared by both. Received: "
                f"query_shape={tuple(query_shape)}, key_shape={tuple(key_shape)}"
            )
        if self.units is None:
            self.affinity_projection = self.dissimilarity_projection = None
            depth = query_shape[-1]
        else:
            self.affinity_projection = self._projection("affinity_projection")
            self.dissimilarity_projection = self._projection("dissimilarity_projection")
            for projection in (self.affinity_projection, self.dissimilarity_projection):
                projection.build((None, None, query_shape[-1]))
            depth = self.units
        self._affinity_factor = (
            1.0 / math.sqrt(depth) if self.affinity_scale is None else self.affinity_scale
        )
        self._dissimilarity_factor = (
            1.0 / depth if self.dissimilarity_scale is None else self.dissimilarity_scale
        )
        self.built = True

    def _projection(self, name):
        return keras.layers.Dense(
            self.units,
            use_bias=False,
            kernel_initializer=keras.initializers.get(
                keras.initializers.serialize(self.kernel_initializer)
            ),
            dtype=self.dtype_policy,
            name=name,
        )

    def _project(self, projection, x):
        return ops.cast(x if projection is None else projection(x), "float32")

    def _calculate_scores(self, query, key):
        """The affinity `E = affinity_scale * F_E(q) . F_E(k)` `(batch, T_q, T_k)`, float32."""
        q = self._project(self.affinity_projection, query)  # (batch, T_q, d)
        k = self._project(self.affinity_projection, key)  # (batch, T_k, d)
        return self._affinity_factor * ops.einsum("bqd,bkd->bqk", q, k)

    def _calculate_weights(
        self, scores, *, query, key, query_mask, value_mask, attention_mask, **kwargs
    ):
        """`M = tanh(E) * sigmoid(N)`, masked keys set to 0, in the compute dtype."""
        q = self._project(self.dissimilarity_projection, query)
        k = self._project(self.dissimilarity_projection, key)
        # (batch, T_q, 1, d) - (batch, 1, T_k, d) -> L1 over d -> (batch, T_q, T_k)
        distance = ops.sum(ops.abs(q[:, :, None, :] - k[:, None, :, :]), axis=-1)
        dissimilarity = -self._dissimilarity_factor * distance  # N, (batch, T_q, T_k)
        if self.centre_dissimilarity:
            allowed = merge_masks(query_mask, value_mask, attention_mask)
            dissimilarity = dissimilarity - _masked_mean(dissimilarity, allowed)
        weights = ops.tanh(scores) * ops.sigmoid(dissimilarity)
        mask = merge_masks(value_mask=value_mask, attention_mask=attention_mask)
        if mask is not None:
            mask = ops.broadcast_to(mask, ops.shape(weights))
            weights = ops.where(mask, weights, ops.zeros_like(weights))
        return ops.cast(weights, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self,
                "units",
                "affinity_scale",
                "dissimilarity_scale",
                "kernel_initializer",
                "centre_dissimilarity",
            )
        )
        return config


def _masked_mean(x, mask):
    """Mean of `x` `(batch, T_q, T_k)` over its allowed entries, per example: `(batch, 1, 1)`.

    An example with no allowed entry gets 0.
    """
    if mask is None:
        return ops.mean(x, axis=(1, 2), keepdims=True)
    keep = ops.cast(ops.broadcast_to(mask, ops.shape(x)), x.dtype)
    total = ops.sum(x * keep, axis=(1, 2), keepdims=True)
    return total / ops.maximum(ops.sum(keep, axis=(1, 2), keepdims=True), 1.0)
