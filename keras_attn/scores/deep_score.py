"""Pavlopoulos et al.'s deep (multi-layer) score."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.scores.score import Score


@keras_attn_export("keras_attn.scores.DeepScore")
class DeepScore(Score):
    """Deep score: a multi-layer perceptron over each (query, key) pair.

        E^(1) = act(W_0 k_i + W_1 q + b^(1))                  (units_1,)
        E^(l) = act(W_l E^(l-1) + b^(l)),  l = 2 .. L-1       (units_l,)
        a(k_i, q) = v^T E^(L-1) + b^(L)                       scalar

    Shapes: query `(batch, T_q, d_q)`, keys `(batch, T_k, d_k)` → scores `(batch, T_q, T_k)`; the
    hidden activations are `(batch, T_q, T_k, units_l)`. `W_0 k_i + b^(1)` is computed once per
    source (`prepare_keys`). With one hidden layer and no `b^(L)` this is the additive score.

    Args:
        units: hidden sizes `units_1 .. units_{L-1}`: a list of positive integers, or one integer
            used for every hidden layer; None uses the key size.
        activation: `act`, `"relu"` in Pavlopoulos et al.
        num_layers: the number of hidden layers `L - 1` when `units` is an integer or None (default
            2); must be None or equal to `len(units)` when `units` is a list.
        kernel_initializer: initializer of the `W_l` and `v`.

    Call arguments:
        query: `(batch, T_q, d_q)`, fed to `W_1`.
        keys: `(batch, T_k, d_k)`, fed to `W_0`.

    Returns:
        Scores `(batch, T_q, T_k)`, the perceptron's output for every (query, key) pair.

    Example:

    >>> import numpy as np
    >>> layer = DeepScore(units=[8, 4])
    >>> q = np.ones((2, 3, 5), "float32"); k = np.ones((2, 7, 6), "float32")
    >>> tuple(layer(q, k).shape), [w.name for w in layer.weights][:4]
    ((2, 3, 7), ['key_kernel', 'query_kernel', 'bias_1', 'kernel_2'])

    References:
        Pavlopoulos, Malakasiotis and Androutsopoulos, 2017, "Deeper Attention to Abusive User
        Content Moderation", EMNLP 2017, section 3.2 (DeepAtt); the pairwise form is that of
        Chaudhari et al., 2021, "An Attentive Survey of Attention Models", arXiv:1904.02874,
        Table 1.
    """

    def __init__(
        self,
        units: int | list[int] | None = None,
        activation="relu",
        num_layers: int | None = None,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if num_layers is not None and (
            not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 1
        ):
            raise ValueError(
                f"Expected num_layers to be a positive integer or None. Received: "
                f"num_layers={num_layers!r}"
            )
        if isinstance(units, (list, tuple)):
            units = list(units)
            if not units or not all(_is_positive_int(u) for u in units):
                raise ValueError(
                    "Expected units to be a positive integer, a non-empty list of them or None. "
                    f"Received: units={units!r}"
                )
            if num_layers is not None and num_layers != len(units):
                raise ValueError(
                    "Expected num_layers to be None or len(units). "
                    f"Received: num_layers={num_layers!r}, units={units!r}"
                )
        elif units is not None and not _is_positive_int(units):
            raise ValueError(
                "Expected units to be a positive integer, a non-empty list of them or None. "
                f"Received: units={units!r}"
            )
        self.units = units
        self.activation = keras.activations.get(activation)
        self.num_layers = num_layers
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _hidden_sizes(self, keys_shape) -> list[int]:
        if isinstance(self.units, list):
            return self.units
        size = self.units if self.units is not None else keys_shape[-1]
        if size is None:
            raise ValueError(
                "DeepScore needs units or a known key size. "
                f"Received: units=None, keys_shape={tuple(keys_shape)}"
            )
        return [size] * (self.num_layers if self.num_layers is not None else 2)

    def build(self, query_shape, keys_shape):
        sizes = self._hidden_sizes(keys_shape)
        self.key_kernel = self.add_weight(
            name="key_kernel",
            shape=(keys_shape[-1], sizes[0]),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.query_kernel = self.add_weight(
            name="query_kernel",
            shape=(query_shape[-1], sizes[0]),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.hidden_biases = [
            self.add_weight(name="bias_1", shape=(sizes[0],), initializer="zeros")
        ]
        self.hidden_kernels = []
        for layer, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True), start=2):
            self.hidden_kernels.append(
                self.add_weight(
                    name=f"kernel_{layer}",
                    shape=(fan_in, fan_out),
                    initializer=clone_initializer(self.kernel_initializer),
                )
            )
            self.hidden_biases.append(
                self.add_weight(name=f"bias_{layer}", shape=(fan_out,), initializer="zeros")
            )
        self.v = self.add_weight(
            name="v", shape=(sizes[-1],), initializer=clone_initializer(self.kernel_initializer)
        )
        self.output_bias = self.add_weight(name="output_bias", shape=(), initializer="zeros")
        super().build(query_shape, keys_shape)

    def prepare_keys(self, keys):
        # W_0 k_i + b^(1): (batch, T_k, d_k) -> (batch, T_k, units_1)
        return ops.matmul(keys, self.key_kernel) + self.hidden_biases[0]

    def score(self, query, prepared_keys):
        projected_query = ops.matmul(query, self.query_kernel)  # (batch, T_q, units_1)
        # (batch, T_q, 1, units_1) + (batch, 1, T_k, units_1) -> (batch, T_q, T_k, units_1)
        hidden = self.activation(
            ops.expand_dims(projected_query, 2) + ops.expand_dims(prepared_keys, 1)
        )
        for kernel, bias in zip(self.hidden_kernels, self.hidden_biases[1:], strict=True):
            hidden = self.activation(ops.matmul(hidden, kernel) + bias)  # (…, units_l)
        return ops.einsum("bqku,u->bqk", hidden, self.v) + self.output_bias

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units,
            activation=keras.activations.serialize(self.activation),
            num_layers=self.num_layers,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        )
        return config


def _is_positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
