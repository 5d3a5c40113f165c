"""Scaled dot-product attention in one fused op, with the library's mask semantics."""

from __future__ import annotations

import keras
from keras import ops

# Backends on which `keras.ops.dot_product_attention` is the faster path by default. On JAX it is
# `jax.nn.dot_product_attention` (cuDNN flash attention on a GPU where shapes and dtypes allow).
# On TensorFlow it is a plain einsum-softmax-einsum with no flash kernel: the explicit path is
# at least as fast there and is kept.
FUSED_BY_DEFAULT = ("jax", "torch")


def fused_attention_by_default() -> bool:
    """Whether the current Keras backend takes the fused path when a layer leaves it automatic.

    True on JAX and PyTorch, False on TensorFlow (see `dot_product_attention`).
    """
    return keras.config.backend() in FUSED_BY_DEFAULT


def dot_product_attention(query, key, value, mask=None, scale: float | None = None):
    """`softmax(Q K^T * scale) V` per head through `keras.ops.dot_product_attention`.

    The fused op is flash attention (Dao et al., 2022) where the backend and device have a kernel
    for it (JAX: cuDNN on a GPU; PyTorch: its scaled-dot-product kernels) and a plain XLA or
    einsum implementation elsewhere. Every backend takes the logits and the softmax in float32
    for float16 / bfloat16 inputs, like `keras_attn.ops.softmax`.

    The mask has this library's meaning: True where attention is allowed; masked keys get zero
    weight, and a query row whose keys are all masked gets an all-zero output (the explicit
    `softmax` gives it all-zero weights), never the uniform average the fused op alone would give.

    Args:
        query: `(batch, T_q, heads, key_dim)`.
        key: `(batch, T_k, heads, key_dim)`.
        value: `(batch, T_k, heads, value_dim)`.
        mask: bool, broadcastable to `(batch, heads, T_q, T_k)` and of rank 4, or None.
        scale: factor on the logits; defaults to `1 / sqrt(key_dim)`.

    Returns:
        `(batch, T_q, heads, value_dim)` in the query's dtype.

    Example:

    >>> import numpy as np
    >>> q = np.ones((1, 2, 1, 4), "float32"); k = np.ones((1, 3, 1, 4), "float32")
    >>> v = np.arange(12, dtype="float32").reshape(1, 3, 1, 4)
    >>> mask = np.array([[[[True, True, False], [False, False, False]]]])
    >>> out = dot_product_attention(q, k, v, mask=mask)
    >>> ops.convert_to_numpy(out)[0, :, 0].tolist()
    [[2.0, 3.0, 4.0, 5.0], [0.0, 0.0, 0.0, 0.0]]

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762, eq. (1).
        Dao et al., 2022, "FlashAttention: Fast and Memory-Efficient Exact Attention with
        IO-Awareness", arXiv:2205.14135.
    """
    if mask is None:
        return ops.dot_product_attention(query, key, value, scale=scale)
    mask = ops.cast(mask, "bool")
    if len(mask.shape) != 4:
        raise ValueError(
            "Expected a mask of rank 4, broadcastable to (batch, heads, T_q, T_k). "
            f"Received: mask.shape={tuple(mask.shape)}"
        )
    fused_mask = mask
    if keras.config.backend() == "jax" and mask.shape[2] != query.shape[1]:
        # cuDNN's kernel takes the mask as a bias with both sequence lengths in full (a padding
        # mask's query axis of 1 makes JAX fall back to its XLA path, logging an error).
        fused_mask = ops.broadcast_to(mask, (*mask.shape[:2], query.shape[1], mask.shape[3]))
    output = ops.dot_product_attention(query, key, value, mask=fused_mask, scale=scale)
    # (batch|1, heads|1, T_q|1, T_k) -> (batch|1, T_q|1, heads|1, 1): rows with a key to see.
    any_allowed = ops.transpose(ops.any(mask, axis=-1, keepdims=True), (0, 2, 1, 3))
    return output * ops.cast(any_allowed, output.dtype)
