"""Learned absolute position embeddings (Gehring et al. 2017)."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.transformer._arguments import check_positive_int


@keras_attn_export("keras_attn.layers.PositionEmbedding")
class PositionEmbedding(keras.layers.Layer):
    """A trainable vector per absolute position, looked up by position (Gehring et al. 2017).

        P: (max_length, d) trainable
        output[b, t] = P[start_index + t]          (batch, T, d)

    The table is sized by the input's last axis when the layer is built. Like
    `SinusoidalPositionEncoding` it returns the position vectors broadcast to the input's shape
    (add them to the embeddings yourself) and reads only the input's shape; the Keras mask of the
    input passes through. Positions must stay below `max_length` (`start_index + T <= max_length`).

    Args:
        max_length: the number of positions `P` holds.
        initializer: initializer of `P`.

    Call arguments:
        inputs: `(batch, T, d)`; only its shape is used.
        start_index: int or int scalar tensor, the position of the first step (incremental
            decoding: a 1-step input at `start_index=k` gives row `k` of `P`).

    Returns:
        `(batch, T, d)` in the compute dtype.

    Example:

    >>> import numpy as np
    >>> layer = PositionEmbedding(max_length=8)
    >>> full = layer(np.zeros((2, 5, 4), "float32"))
    >>> tuple(full.shape)
    (2, 5, 4)
    >>> step = layer(np.zeros((2, 1, 4), "float32"), start_index=3)
    >>> bool(np.array_equal(ops.convert_to_numpy(step)[:, 0], ops.convert_to_numpy(full)[:, 3]))
    True

    References:
        Gehring et al., 2017, "Convolutional Sequence to Sequence Learning", arXiv:1705.03122.
    """

    def __init__(self, max_length: int, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.max_length = check_positive_int("max_length", max_length)
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_length, inputs_shape[-1]),
            initializer=clone_initializer(self.initializer),
        )
        self.built = True

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        table = ops.cast(self.position_embeddings, self.compute_dtype)
        rows = ops.slice(table, [start_index, 0], [shape[-2], inputs.shape[-1]])  # (T, d)
        return ops.broadcast_to(rows, shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(serialize_arguments(self, "max_length", "initializer"))
        return config
