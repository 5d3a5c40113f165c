"""Feature-based score (after Li et al.)."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.scores.additive_score import AdditiveScore


@keras_attn_export("keras_attn.scores.FeatureScore")
class FeatureScore(AdditiveScore):
    """Feature-based score `a(k_i, q) = v^T act(W_0 phi(k_i) + W_1 phi(q) + b)`.

    `phi` is a fixed element-wise feature map applied to keys and queries before the two learned
    projections `W_0` `(d_k, units)` and `W_1` `(d_q, units)`; `v` `(units,)` and `b` `(units,)` are
    learned. Shapes: query `(batch, T_q, d_q)`, keys `(batch, T_k, d_k)` → `(batch, T_q, T_k)`.
    `W_0 phi(K) + b` is computed once per source (`prepare_keys`). With `feature_map="linear"` it is
    the additive score.

    Interpretation: the formula as usually quoted, `v^T act(W_0 phi(K) + W_1 phi(K) + b)`, read
    literally contains neither `k_i` nor `q` and collapses to `(W_0 + W_1) phi(K)`. Li et al.
    (selective kernels) score inputs through learned projections of feature descriptors `phi` of
    them; this class keeps that shape and reads the two terms as the features of the key and of
    the query, like the additive score. The global pooling Li et al. use for `phi` is not taken:
    a pooled `phi(K)` would let padded keys change every score, which the score contract forbids.

    Args:
        units: size of the hidden layer; defaults to the key size.
        activation: `act`.
        feature_map: `phi`, any Keras activation (name or callable), applied element-wise.
        use_bias: whether to add `b`.
        kernel_initializer: initializer of `W_0`, `W_1` and `v`.

    Call arguments:
        query: `(batch, T_q, d_q)`, mapped by `phi` and then `W_1`.
        keys: `(batch, T_k, d_k)`, mapped by `phi` and then `W_0`.

    Returns:
        Scores `(batch, T_q, T_k)`.

    Example:

    >>> import numpy as np
    >>> layer = FeatureScore(units=3, kernel_initializer="ones")
    >>> q = np.full((1, 1, 2), -1.0, "float32"); k = np.array([[[0.5, -4.0]]], "float32")
    >>> round(float(layer(q, k)[0, 0, 0]), 4)  # 3 * tanh(relu(0.5) + relu(-4.0))
    1.3864

    References:
        Li, Wang, Hu and Yang, 2019, "Selective Kernel Networks", arXiv:1903.06586, eqs. (1)–(5);
        the row's form is that of Chaudhari et al., 2021, "An Attentive Survey of Attention
        Models", arXiv:1904.02874, Table 1.
    """

    def __init__(
        self,
        units: int | None = None,
        activation="tanh",
        feature_map="relu",
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(
            units=units,
            activation=activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            **kwargs,
        )
        self.feature_map = keras.activations.get(feature_map)

    def _query_projection(self, query):
        return super()._query_projection(self.feature_map(query))

    def _key_projection(self, keys):
        return super()._key_projection(self.feature_map(keys))

    def get_config(self):
        config = super().get_config()
        config["feature_map"] = keras.activations.serialize(self.feature_map)
        return config
