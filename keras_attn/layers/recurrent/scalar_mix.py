"""ELMo's scalar mix: a learned softmax-weighted, scaled sum of a network's layer outputs."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.layers.ScalarMix")
class ScalarMix(keras.layers.Layer):
    """Task-specific weighted sum of layer representations (ELMo, Peters et al., 2018).

    For layer representations `h_j` `(batch, T, d)`, `j = 0..L`:

        w       = softmax(s)                          (L + 1,)    s learnable, zeros at first
        ELMo_k  = gamma * sum_j w_j * norm(h_{k,j})   (batch, T, d)   gamma learnable, 1 at first

    `norm` is the identity, or with `layer_norm=True` a layer normalisation of every vector
    `h_{k,j}` over its `d` features (mean 0, variance 1, epsilon `1e-12` on the variance; no
    learned scale or offset). Peters et al. (2018) normalise each `h_j` over all unpadded
    entries of the batch at once; per-vector normalisation keeps each sequence's output
    independent of the rest of the batch, which a served model needs. `s` and `gamma` are
    float32 weights and the softmax is taken in float32.

    Args:
        layer_norm: normalise every `h_{k,j}` before mixing.
        epsilon: added to the variance in the layer normalisation.

    Call arguments:
        inputs: a list of `L + 1` tensors `(batch, T, d)`, or one tensor `(batch, T, L + 1, d)`
            (layers on axis -2, as `BiLanguageModel` returns them).
        mask: bool `(batch, T)` (or the list of the inputs' Keras masks, of which the first is
            used); padded positions of the output are exactly 0. Filled from Keras masking.

    Returns:
        `(batch, T, d)`, carrying the mask.

    Example:

    >>> import numpy as np
    >>> layers = np.ones((2, 4, 3, 5), "float32") * np.arange(3, dtype="float32")[:, None]
    >>> mix = ScalarMix()
    >>> mix(layers)[0, 0].numpy().tolist()  # softmax(0, 0, 0) = 1/3 each: (0 + 1 + 2) / 3
    [1.0, 1.0, 1.0, 1.0, 1.0]

    References:
        Peters et al., 2018, "Deep contextualized word representations", arXiv:1802.05365,
        eq. 1.
    """

    def __init__(self, layer_norm: bool = False, epsilon: float = 1e-12, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(layer_norm, bool):
            raise ValueError(
                f"Expected layer_norm to be a bool. Received: layer_norm={layer_norm!r}"
            )
        if not epsilon > 0:
            raise ValueError(f"Expected epsilon > 0. Received: epsilon={epsilon!r}")
        self.layer_norm = layer_norm
        self.epsilon = float(epsilon)
        self.supports_masking = True

    @staticmethod
    def _num_layers(inputs_shape) -> int:
        if isinstance(inputs_shape, (list, tuple)) and isinstance(inputs_shape[0], (list, tuple)):
            return len(inputs_shape)
        return inputs_shape[-2]

    def build(self, inputs_shape):
        num_layers = self._num_layers(inputs_shape)
        self.scalar_parameters = self.add_weight(
            name="scalar_parameters",
            shape=(num_layers,),
            initializer="zeros",
            dtype="float32",
            autocast=False,
        )
        self.gamma = self.add_weight(
            name="gamma", shape=(), initializer="ones", dtype="float32", autocast=False
        )
        self.built = True

    def mixing_weights(self):
        """`softmax(s)` `(L + 1,)`, float32."""
        return ops.softmax(ops.cast(self.scalar_parameters, "float32"))

    def call(self, inputs, mask=None):
        if isinstance(inputs, (list, tuple)):
            inputs = ops.stack(inputs, axis=-2)  # (batch, T, L + 1, d)
            if isinstance(mask, (list, tuple)):
                mask = mask[0]
        layers = ops.cast(inputs, "float32")
        if self.layer_norm:
            mean = ops.mean(layers, axis=-1, keepdims=True)
            variance = ops.mean(ops.square(layers - mean), axis=-1, keepdims=True)
            layers = (layers - mean) * ops.rsqrt(variance + self.epsilon)
        weights = self.mixing_weights()[:, None]  # (L + 1, 1), broadcast over d
        gamma = ops.cast(self.gamma, "float32")
        mixed = gamma * ops.sum(weights * layers, axis=-2)  # (batch, T, d)
        if mask is not None:
            mixed = ops.where(ops.expand_dims(mask, -1), mixed, ops.zeros_like(mixed))
        return ops.cast(mixed, self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            return mask[0]
        return mask

    def compute_output_shape(self, inputs_shape):
        if isinstance(inputs_shape, (list, tuple)) and isinstance(inputs_shape[0], (list, tuple)):
            return tuple(inputs_shape[0])
        return tuple(inputs_shape[:-2]) + (inputs_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(layer_norm=self.layer_norm, epsilon=self.epsilon)
        return config
