"""Mask helpers shared by every attention layer."""

from __future__ import annotations

from keras import ops


def merge_masks(query_mask=None, value_mask=None, attention_mask=None):
    """Combine per-position masks into one boolean attention mask.

    Args:
        query_mask: bool `(batch, T_q)`, True for real query positions, or None.
        value_mask: bool `(batch, T_k)`, True for real key/value positions, or None.
        attention_mask: bool `(batch, T_q, T_k)` (or broadcastable), or None.

    Returns:
        A bool tensor broadcastable to `(batch, T_q, T_k)`, or None when all inputs are None.
        A query position that is padded keeps all of its keys: its output is zeroed by the caller,
        so its weights stay a proper distribution and never become NaN.
    """
    mask = None
    if value_mask is not None:
        mask = ops.expand_dims(ops.cast(value_mask, "bool"), axis=-2)
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
        mask = attention_mask if mask is None else ops.logical_and(mask, attention_mask)
    return mask


def apply_query_mask(outputs, query_mask):
    """Zero the rows of `outputs` `(batch, T_q, ...)` whose query position is padded."""
    if query_mask is None:
        return outputs
    keep = ops.cast(query_mask, outputs.dtype)
    while len(keep.shape) < len(outputs.shape):
        keep = ops.expand_dims(keep, -1)
    return outputs * keep
