"""Pure functions: masks, attention distributions, gradient scaling and cache writes."""

from keras_attn.ops.distributions import (
    entmax15,
    entmax_bisect,
    hardmax,
    sigmoid,
    softmax,
    sparsemax,
)
from keras_attn.ops.gradients import scale_gradient
from keras_attn.ops.masking import apply_query_mask, merge_masks
from keras_attn.ops.slots import write_slots

__all__ = [
    "apply_query_mask",
    "entmax15",
    "entmax_bisect",
    "hardmax",
    "merge_masks",
    "scale_gradient",
    "sigmoid",
    "softmax",
    "sparsemax",
    "write_slots",
]
