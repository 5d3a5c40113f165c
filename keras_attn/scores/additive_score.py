"""Bahdanau's additive score."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.scores.score import Score


@keras_attn_export("keras_attn.scores.AdditiveScore")
class AdditiveScore(Score):
    """Additive score `a(k_i, q) = v^T act(W_1 q + W_2 k_i + b)` (Bahdanau et al., 2015).

    `W_1` `(d_q, units)`, `W_2` `(d_k, units)`, `v` `(units,)` and the optional bias `b` `(units,)`
    are learned. `K W_2` is computed once per source (`prepare_keys`), so a decoder step costs one
    `(d_q, units)` product. This is not `keras.layers.AdditiveAttention`, which has no `W_1`, `W_2`.

    Args:
        units: size of the hidden layer of the alignment network; defaults to the key size.
        activation: `act`, `"tanh"` in Bahdanau et al.
        use_bias: whether to add `b`.
        kernel_initializer: initializer of `W_1`, `W_2` and `v`.

    References:
        Bahdanau, Cho and Bengio, 2015, "Neural Machine Translation by Jointly Learning to Align
        and Translate", arXiv:1409.0473, appendix A.1.2.
    """

    def __init__(
        self,
        units: int | None = None,
        activation="tanh",
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if units is not None and (not isinstance(units, int) or units <= 0):
            raise ValueError(
                f"Expected units to be a positive integer or None. Received: units={units!r}"
            )
        self.units = units
        self.activation = keras.activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _hidden_units(self, keys_shape) -> int:
        return self.units if self.units is not None else keys_shape[-1]

    def _build_projections(self, query_shape, keys_shape, units):
        self.query_kernel = self.add_weight(
            name="query_kernel",
            shape=(query_shape[-1], units),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.key_kernel = self.add_weight(
            name="key_kernel",
            shape=(keys_shape[-1], units),
            initializer=clone_initializer(self.kernel_initializer),
        )

    def build(self, query_shape, keys_shape):
        units = self._hidden_units(keys_shape)
        self._build_projections(query_shape, keys_shape, units)
        self.bias = (
            self.add_weight(name="bias", shape=(units,), initializer="zeros")
            if self.use_bias
            else None
        )
        self.v = self.add_weight(
            name="v", shape=(units,), initializer=clone_initializer(self.kernel_initializer)
        )
        super().build(query_shape, keys_shape)

    def _query_projection(self, query):
        return ops.matmul(query, self.query_kernel)

    def _key_projection(self, keys):
        return ops.matmul(keys, self.key_kernel)

    def prepare_keys(self, keys):
        projected = self._key_projection(keys)  # (batch, T_k, units)
        if self.bias is not None:
            projected = projected + self.bias
        return projected

    def score(self, query, prepared_keys):
        projected_query = self._query_projection(query)  # (batch, T_q, units)
        # (batch, T_q, 1, units) + (batch, 1, T_k, units) -> (batch, T_q, T_k, units)
        hidden = self.activation(
            ops.expand_dims(projected_query, 2) + ops.expand_dims(prepared_keys, 1)
        )
        return ops.einsum("bqku,u->bqk", hidden, self.v)

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units,
            activation=keras.activations.serialize(self.activation),
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        )
        return config
