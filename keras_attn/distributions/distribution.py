"""Base class of attention distributions `p` in `A(q, K, V) = sum_i p(a(k_i, q)) v_i`."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.distributions.Distribution")
class Distribution(keras.layers.Layer):
    """Maps raw scores `(batch, T_q, T_k)` and a boolean mask to attention weights.

    Subclasses implement `call(scores, attention_mask=None)` (bool, True = may attend); masked
    positions must get exactly zero weight and a fully masked row must not produce NaN.
    A subclass with constructor arguments adds them to `get_config`.
    """

    def compute_output_shape(self, scores_shape, attention_mask_shape=None):
        return scores_shape

    def get_config(self) -> dict:
        """The layer's base config (name, dtype policy, trainable).

        Defined here so that a distribution built with `dtype=<keras.DTypePolicy>`, as the
        attention layers build theirs, serializes: Keras' automatic config only accepts plain
        constructor arguments.
        """
        return super().get_config()
