"""Attention over several representations of the same tokens (dynamic meta-embeddings)."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn import ops as attn_ops
from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments


@keras_attn_export("keras_attn.layers.MultiRepresentationAttention")
class MultiRepresentationAttention(keras.layers.Layer):
    """Multi-representation attention: per token, a softmax over R projected representations.

    For `R` representations of every token stacked as `x` `(batch, T, R, d)`:

        x'_tr = P_r x_tr + b_r                    (batch, T, R, units), one projection per r
        alpha_t = softmax_r(a^T x'_tr)            (batch, T, R)
        y_t = sum_r alpha_tr x'_tr                (batch, T, units)

    This is the dynamic meta-embedding of Kiela et al. (2018) with `R` embeddings of a common size
    `d` (project them to `d` first, or pad, when their sizes differ). The paper's scalar bias
    inside the softmax is left out: it is shared by all representations and cancels. The softmax
    is taken in float32.

    Args:
        units: size of the common projected space `x'_tr`.
        kernel_initializer: initializer of the projections `P_r` `(R, d, units)` and of `a`.

    Call arguments:
        inputs: `(batch, T, R, d)`.
        mask: bool `(batch, T)`, True at real tokens; filled from Keras masking. Padded tokens
            get all-zero weights and a zero output.
        inputs_mask: the same token mask under the name Keras fills from Keras masking when
            `representation_mask` is passed as well (with several tensor arguments Keras fills
            `<argument>_mask`, not `mask`); used when `mask` is None.
        representation_mask: optional bool `(batch, T, R)`, True where representation `r` of a
            token exists (e.g. the word is in that embedding's vocabulary). Missing
            representations get exactly zero weight; a token with none gets zero weights and a
            zero output, never NaN.
        return_attention_scores: also return the weights.

    Returns:
        `outputs` `(batch, T, units)` (carrying the token mask), or `(outputs, weights)` with
        `weights` `(batch, T, R)` when `return_attention_scores=True`; the last axis is the one
        the distribution runs over.

    Example:

    >>> import numpy as np
    >>> layer = MultiRepresentationAttention(6)
    >>> outputs, weights = layer(np.ones((2, 5, 3, 4), "float32"), return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(weights.shape)
    ((2, 5, 6), (2, 5, 3))

    References:
        Kiela, Wang and Cho, 2018, "Dynamic Meta-Embeddings for Improved Sentence
        Representations", EMNLP, arXiv:1804.07983 (DME); Chaudhari, Polatkan, Ramanath and
        Mithal, 2019, "An Attentive Survey of Attention Models", arXiv:1904.02874
        ("multi-representational" attention).
    """

    def __init__(self, units: int, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
            raise ValueError(f"Expected units to be a positive integer. Received: units={units!r}")
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, inputs_shape, representation_mask_shape=None):
        _, _, num_representations, depth = inputs_shape
        if num_representations is None:
            raise ValueError(
                "Expected a known number of representations (axis 2 of the inputs). "
                f"Received: inputs_shape={inputs_shape}"
            )
        self.kernel = self.add_weight(
            name="kernel",
            shape=(num_representations, depth, self.units),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.bias = self.add_weight(
            name="bias", shape=(num_representations, self.units), initializer="zeros"
        )
        self.attention_vector = self.add_weight(
            name="attention_vector",
            shape=(self.units,),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.built = True

    def call(
        self,
        inputs,
        mask=None,
        representation_mask=None,
        inputs_mask=None,
        return_attention_scores=False,
    ):
        mask = inputs_mask if mask is None else mask
        # (batch, T, R, d) x (R, d, units) -> (batch, T, R, units)
        projected = ops.einsum("btrd,rdu->btru", inputs, self.kernel) + self.bias
        scores = ops.einsum("btru,u->btr", projected, self.attention_vector)  # (batch, T, R)
        keep = None
        if mask is not None:
            keep = ops.expand_dims(ops.cast(mask, "bool"), -1)  # (batch, T, 1)
        if representation_mask is not None:
            present = ops.cast(representation_mask, "bool")
            keep = present if keep is None else ops.logical_and(keep, present)
        weights = attn_ops.softmax(scores, mask=keep, axis=-1)
        # (batch, T, R) x (batch, T, R, units) -> (batch, T, units)
        outputs = ops.einsum("btr,btru->btu", weights, projected)
        if return_attention_scores:
            return outputs, weights
        return outputs

    def compute_mask(self, inputs, mask=None, **kwargs):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(serialize_arguments(self, "units", "kernel_initializer"))
        return config
