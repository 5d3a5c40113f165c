"""Attention distributions over a masked axis.

Every function takes raw scores and an optional boolean mask (True = may be attended) and returns
weights of the scores' dtype. Normalisers are computed in float32 whatever the input dtype, and the
masked fill value is applied in float32, so float16 never overflows. Masked positions receive
exactly zero weight; a row whose every position is masked gets all-zero weights, never NaN.
"""

from __future__ import annotations

from keras import ops

# Large enough to vanish under exp() in float32, small enough never to overflow it.
_MASKED_SCORE = -1e9


def softmax(scores, mask=None, axis: int = -1):
    """Masked softmax: `exp(s_i) / sum_{j in mask} exp(s_j)` along `axis`.

    Args:
        scores: float tensor, e.g. `(batch, T_q, T_k)`.
        mask: bool tensor broadcastable to `scores`, True where attention is allowed; None = all.
        axis: the axis to normalise over.

    Returns:
        Weights with the dtype of `scores`, summing to one over unmasked positions, exactly zero on
        masked ones (all zeros on a fully masked row).

    Example:

    >>> import numpy as np
    >>> w = softmax(np.array([[1.0, 2.0, 3.0]]), mask=np.array([[True, True, False]]))
    >>> np.round(ops.convert_to_numpy(w), 4).tolist()
    [[0.2689, 0.7311, 0.0]]
    """
    scores = ops.convert_to_tensor(scores)
    dtype = scores.dtype
    logits = ops.cast(scores, "float32")
    if mask is None:
        return ops.cast(ops.softmax(logits, axis=axis), dtype)
    mask = ops.broadcast_to(ops.cast(mask, "bool"), ops.shape(logits))
    logits = ops.where(mask, logits, ops.full_like(logits, _MASKED_SCORE))
    weights = ops.softmax(logits, axis=axis)
    weights = ops.where(mask, weights, ops.zeros_like(weights))
    return ops.cast(weights, dtype)
