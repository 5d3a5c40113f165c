"""Pure functions: masks and attention distributions."""

from keras_attn.ops.distributions import (
    entmax15,
    entmax_bisect,
    hardmax,
    sigmoid,
    softmax,
    sparsemax,
)
from keras_attn.ops.masking import apply_query_mask, merge_masks

__all__ = [
    "apply_query_mask",
    "entmax15",
    "entmax_bisect",
    "hardmax",
    "merge_masks",
    "sigmoid",
    "softmax",
    "sparsemax",
]
