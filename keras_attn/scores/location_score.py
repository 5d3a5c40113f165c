"""Luong et al.'s location-based score."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.scores.score import Score


@keras_attn_export("keras_attn.scores.LocationScore")
class LocationScore(Score):
    """Location-based score `a(k_i, q) = act(W q)_i`: the query alone scores every position.

    `W` `(d_q, max_length)` maps each query `(batch, T_q, d_q)` to one score per source position,
    `(batch, T_q, max_length)`; for keys of length `T_k <= max_length` the scores are the first
    `T_k` of them, `(batch, T_q, T_k)`. The key values are never read (only their length), so
    padded keys cannot influence the scores; the distribution masks them as usual.

    Args:
        max_length: the longest key sequence, a positive integer; None takes the key length seen
            at build time (which must then be static).
        activation: `act`; None (linear) as in Luong et al., where the softmax follows directly.
        kernel_initializer: initializer of `W`.

    Call arguments:
        query: `(batch, T_q, d_q)`.
        keys: `(batch, T_k, d_k)`, `T_k <= max_length`; a statically known longer `T_k` raises
            `ValueError`.

    Returns:
        Scores `(batch, T_q, T_k)`.

    Example:

    >>> import numpy as np
    >>> layer = LocationScore(max_length=6)
    >>> q = np.ones((2, 3, 4), "float32"); k = np.ones((2, 5, 8), "float32")
    >>> tuple(layer(q, k).shape), tuple(layer.kernel.shape)
    ((2, 3, 5), (4, 6))

    References:
        Luong, Pham and Manning, 2015, "Effective Approaches to Attention-based Neural Machine
        Translation", arXiv:1508.04025, eq. (9) "location".
    """

    def __init__(
        self,
        max_length: int | None = None,
        activation=None,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if max_length is not None and (
            not isinstance(max_length, int) or isinstance(max_length, bool) or max_length <= 0
        ):
            raise ValueError(
                "Expected max_length to be a positive integer or None. "
                f"Received: max_length={max_length!r}"
            )
        self.max_length = max_length
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _check_length(self, key_length, limit) -> None:
        if key_length is not None and key_length > limit:
            raise ValueError(
                f"LocationScore scores at most max_length={limit} keys. "
                f"Received: keys of length {key_length}"
            )

    def build(self, query_shape, keys_shape):
        length = self.max_length if self.max_length is not None else keys_shape[1]
        if length is None:
            raise ValueError(
                "LocationScore needs max_length or a static key length. "
                f"Received: max_length=None, keys_shape={tuple(keys_shape)}"
            )
        self._check_length(keys_shape[1], length)
        self.kernel = self.add_weight(
            name="kernel",
            shape=(query_shape[-1], length),
            initializer=clone_initializer(self.kernel_initializer),
        )
        super().build(query_shape, keys_shape)

    def score(self, query, prepared_keys):
        self._check_length(prepared_keys.shape[1], self.kernel.shape[-1])
        positions = self.activation(ops.matmul(query, self.kernel))  # (batch, T_q, max_length)
        return positions[:, :, : ops.shape(prepared_keys)[1]]  # (batch, T_q, T_k)

    def get_config(self):
        config = super().get_config()
        config.update(
            max_length=self.max_length,
            activation=keras.activations.serialize(self.activation),
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        )
        return config
