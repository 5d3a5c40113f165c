"""The fixed sine/cosine position encoding of the Transformer."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.layers.SinusoidalPositionEncoding")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """Sinusoidal position encoding (Vaswani et al., 2017, section 3.5).

    For position `pos` and feature `j` of `d` features (`i = floor(j / 2)`):

        PE(pos, 2i)     = sin(pos / max_wavelength^(2i / d))
        PE(pos, 2i + 1) = cos(pos / max_wavelength^(2i / d))

    The wavelengths form a geometric progression from `2π` to `max_wavelength · 2π`. The layer
    returns the encoding of positions `start_index .. start_index + T - 1`, broadcast to the
    input's shape `(batch, T, d)`; add it to the embeddings yourself (or use
    `TokenAndPositionEmbedding`). Only the input's shape is read, never its values. Angles and
    sines are computed in float32 and cast to the compute dtype at the end (float16 cannot even
    represent the position 2049 exactly). The Keras mask of the input passes through.

    Args:
        max_wavelength: the base `10000` of the wavelengths.

    Call arguments:
        inputs: `(batch, T, d)`; only its shape is used.
        start_index: int or int scalar tensor, the position of the first step (incremental
            decoding: a 1-step input at `start_index=k` gives row `k` of the full encoding).

    Returns:
        `(batch, T, d)` in the compute dtype.

    Example:

    >>> import numpy as np
    >>> layer = SinusoidalPositionEncoding()
    >>> encoding = layer(np.zeros((1, 3, 4), "float32"))
    >>> np.round(ops.convert_to_numpy(encoding)[0].astype("float64"), 3).tolist()
    [[0.0, 1.0, 0.0, 1.0], [0.841, 0.54, 0.01, 1.0], [0.909, -0.416, 0.02, 1.0]]
    >>> step = layer(np.zeros((1, 1, 4), "float32"), start_index=2)
    >>> bool(np.allclose(ops.convert_to_numpy(step)[0, 0], ops.convert_to_numpy(encoding)[0, 2]))
    True

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762.
    """

    def __init__(self, max_wavelength: float = 10000.0, **kwargs):
        super().__init__(**kwargs)
        if (
            isinstance(max_wavelength, bool)
            or not isinstance(max_wavelength, (int, float))
            or max_wavelength <= 1
        ):
            raise ValueError(
                f"Expected max_wavelength to be a number > 1. Received: "
                f"max_wavelength={max_wavelength!r}"
            )
        self.max_wavelength = float(max_wavelength)
        self.supports_masking = True

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        dim = inputs.shape[-1]
        positions = ops.cast(ops.arange(shape[-2]), "float32") + ops.cast(start_index, "float32")
        features = ops.arange(dim)
        # feature j uses the frequency of its pair 2i = j - j % 2: max_wavelength^(-2i / d)
        exponents = ops.cast(features - features % 2, "float32") / float(dim)
        inverse_frequencies = ops.power(self.max_wavelength, -exponents)  # (d,)
        angles = ops.expand_dims(positions, -1) * inverse_frequencies  # (T, d)
        encoding = ops.where(features % 2 == 0, ops.sin(angles), ops.cos(angles))
        return ops.broadcast_to(ops.cast(encoding, self.compute_dtype), shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(max_wavelength=self.max_wavelength)
        return config
