"""Pure functions: masks, distributions, fused attention, gradient scaling, cache writes, shapes."""

from keras_attn import _serializables
from keras_attn.ops.distributions import (
    entmax15,
    entmax_bisect,
    hardmax,
    sigmoid,
    softmax,
    sparsemax,
)
from keras_attn.ops.fused_attention import dot_product_attention, fused_attention_by_default
from keras_attn.ops.gradients import scale_gradient
from keras_attn.ops.masking import apply_query_mask, merge_masks
from keras_attn.ops.shapes import dimension, leading_shape
from keras_attn.ops.slots import slot_coordinates, write_slots

__all__ = [
    "apply_query_mask",
    "dimension",
    "dot_product_attention",
    "entmax15",
    "entmax_bisect",
    "fused_attention_by_default",
    "hardmax",
    "leading_shape",
    "merge_masks",
    "scale_gradient",
    "sigmoid",
    "slot_coordinates",
    "softmax",
    "sparsemax",
    "write_slots",
]

_serializables.imported(__name__)
