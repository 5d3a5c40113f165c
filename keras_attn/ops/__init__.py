"""Pure functions: masks and attention distributions."""

from keras_attn.ops.distributions import softmax
from keras_attn.ops.masking import apply_query_mask, merge_masks

__all__ = ["apply_query_mask", "merge_masks", "softmax"]
