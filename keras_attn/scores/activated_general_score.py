"""Ma et al.'s activated general score."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.scores.general_score import GeneralScore


@keras_attn_export("keras_attn.scores.ActivatedGeneralScore")
class ActivatedGeneralScore(GeneralScore):
    """Activated general score `a(k_i, q) = act(q^T W k_i + b)`.

    `W` `(d_q, d_k)` and the scalar bias `b` are learned; as in `GeneralScore` the keys are
    projected once, `K' = K W^T` `(batch, T_k, d_q)`, and a step computes `act(q^T k'_i + b)`.
    Scores are `(batch, T_q, T_k)`; with `tanh` they lie in `(-1, 1)`.

    Args:
        activation: `act`, `"tanh"` in Ma et al.
        use_bias: whether to add the scalar `b`.
        kernel_initializer: initializer of `W`.

    Call arguments:
        query: `(batch, T_q, d_q)`, the width `W` was built for.
        keys: `(batch, T_k, d_k)`; `d_k` may differ from `d_q`.

    Returns:
        Scores `(batch, T_q, T_k)`, squashed by `act`.

    Example:

    >>> import numpy as np
    >>> layer = ActivatedGeneralScore(activation="relu", kernel_initializer="ones")
    >>> q = np.ones((1, 1, 2), "float32"); k = np.array([[[1.0, 2.0], [-3.0, 1.0]]], "float32")
    >>> layer(q, k).numpy().tolist()
    [[[6.0, 0.0]]]

    References:
        Ma, Li, Zhang and Wang, 2017, "Interactive Attention Networks for Aspect-Level Sentiment
        Classification", arXiv:1709.00893, eq. (5).
    """

    def __init__(
        self,
        activation="tanh",
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(kernel_initializer=kernel_initializer, **kwargs)
        self.activation = keras.activations.get(activation)
        self.use_bias = bool(use_bias)

    def build(self, query_shape, keys_shape):
        self.bias = (
            self.add_weight(name="bias", shape=(), initializer="zeros") if self.use_bias else None
        )
        super().build(query_shape, keys_shape)

    def score(self, query, prepared_keys):
        scores = super().score(query, prepared_keys)  # (batch, T_q, T_k)
        if self.bias is not None:
            scores = scores + self.bias
        return self.activation(scores)

    def get_config(self):
        config = super().get_config()
        config.update(
            activation=keras.activations.serialize(self.activation), use_bias=self.use_bias
        )
        return config
