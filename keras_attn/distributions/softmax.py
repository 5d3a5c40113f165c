"""The softmax distribution as a serializable object."""

from __future__ import annotations

from keras_attn import ops as attn_ops
from keras_attn.api_export import keras_attn_export
from keras_attn.distributions.distribution import Distribution


@keras_attn_export("keras_attn.distributions.Softmax")
class Softmax(Distribution):
    """Masked softmax over the last axis: `exp(s_i) / sum_j exp(s_j)`.

    Computed in float32 whatever the compute dtype; see `keras_attn.ops.softmax`.
    """

    def call(self, scores, attention_mask=None):
        return attn_ops.softmax(scores, mask=attention_mask, axis=-1)
