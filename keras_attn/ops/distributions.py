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
    # The mask stays in its own (often much smaller) broadcastable shape: `where` broadcasts it,
    # and a fully masked row is zeroed by one multiply with its row flag.
    mask = ops.cast(mask, "bool")
    logits = ops.where(mask, logits, _MASKED_SCORE)
    weights = ops.softmax(logits, axis=axis)
    # Masked entries are exactly 0 already (exp underflows); rows with nothing to attend to
    # would be uniform, and are zeroed.
    any_allowed = ops.any(mask, axis=axis, keepdims=True)
    return ops.cast(weights * ops.cast(any_allowed, "float32"), dtype)


def _prepare(scores, mask, axis: int):
    """Float32 scores and a bool mask, both with `axis` moved last, and the input dtype.

    Masked scores are replaced by 0 so that huge padding values never enter any arithmetic.
    """
    scores = ops.convert_to_tensor(scores)
    dtype = scores.dtype
    x = ops.cast(scores, "float32")
    if mask is None:
        mask = ops.ones_like(x, dtype="bool")
    else:
        mask = ops.broadcast_to(ops.cast(mask, "bool"), ops.shape(x))
    x = ops.moveaxis(x, axis, -1)
    mask = ops.moveaxis(mask, axis, -1)
    return ops.where(mask, x, ops.zeros_like(x)), mask, dtype


def _finish(weights, mask, dtype, axis: int):
    """Exact zeros on masked positions, `axis` moved back, cast to the input dtype."""
    weights = ops.where(mask, weights, ops.zeros_like(weights))
    return ops.cast(ops.moveaxis(weights, -1, axis), dtype)


def _shift_by_masked_max(x, mask):
    """`x - max_{unmasked} x` per row (a fully masked row is not shifted)."""
    neg_inf = ops.full_like(x, float("-inf"))
    row_max = ops.max(ops.where(mask, x, neg_inf), axis=-1, keepdims=True)
    row_max = ops.where(ops.any(mask, axis=-1, keepdims=True), row_max, ops.zeros_like(row_max))
    return x - row_max


def _sorted_valid(z, mask):
    """Unmasked values sorted in decreasing order, with rank `k` (1, 2, …) and validity.

    Masked entries sort last (as -inf) and are then replaced by 0, so only the first
    `n_valid` entries of each row are real; `valid` is True there.
    """
    neg_inf = ops.full_like(z, float("-inf"))
    z_sorted = -ops.sort(-ops.where(mask, z, neg_inf), axis=-1)  # decreasing
    rank = ops.cumsum(ops.ones_like(z), axis=-1)  # 1, 2, ..., T
    n_valid = ops.sum(ops.cast(mask, "float32"), axis=-1, keepdims=True)
    valid = rank <= n_valid
    return ops.where(valid, z_sorted, ops.zeros_like(z_sorted)), rank, valid


def sigmoid(scores, mask=None, axis: int = -1):
    """Elementwise logistic weights `1 / (1 + exp(-s_i))`, not normalised.

    Args:
        scores: float tensor, e.g. `(batch, T_q, T_k)`.
        mask: bool tensor broadcastable to `scores`, True where attention is allowed; None = all.
        axis: kept for a uniform signature; the sigmoid acts on each entry independently.

    Returns:
        Weights in (0, 1) with the dtype of `scores`, exactly zero on masked positions.

    Example:

    >>> import numpy as np
    >>> w = sigmoid(np.array([[0.0, 2.0, 3.0]]), mask=np.array([[True, True, False]]))
    >>> np.round(ops.convert_to_numpy(w), 4).tolist()
    [[0.5, 0.8808, 0.0]]
    """
    x, mask, dtype = _prepare(scores, mask, axis)
    return _finish(ops.sigmoid(x), mask, dtype, axis)


def sparsemax(scores, mask=None, axis: int = -1):
    """Sparsemax: the Euclidean projection of the scores onto the probability simplex.

    `p_i = max(s_i - tau, 0)`, where the threshold `tau = (sum_{j <= k} s_(j) - 1) / k` uses the
    scores sorted in decreasing order `s_(1) >= s_(2) >= …` and the support size
    `k = max{k : 1 + k s_(k) > sum_{j <= k} s_(j)}` (Martins and Astudillo, 2016, Alg. 1). Only
    unmasked positions take part. Gradients are those of this closed form (on the support
    `S`: `dp_i/ds_j = delta_ij - 1/|S|`), which automatic differentiation reproduces exactly.

    Args:
        scores: float tensor, e.g. `(batch, T_q, T_k)`.
        mask: bool tensor broadcastable to `scores`, True where attention is allowed; None = all.
        axis: the axis to normalise over.

    Returns:
        Weights with the dtype of `scores` (computed in float32), summing to one over unmasked
        positions, often exactly zero; exactly zero on masked positions and all zeros on a fully
        masked row.

    Example:

    >>> import numpy as np
    >>> w = sparsemax(np.array([[0.1, 1.1, 0.5, 9.0]]), mask=np.array([[True, True, True, False]]))
    >>> np.round(ops.convert_to_numpy(w), 4).tolist()
    [[0.0, 0.8, 0.2, 0.0]]

    References:
        Martins and Astudillo, 2016, "From Softmax to Sparsemax: A Sparse Model of Attention and
        Multi-Label Classification", arXiv:1602.02068.
    """
    x, mask, dtype = _prepare(scores, mask, axis)
    z = _shift_by_masked_max(x, mask)
    z_sorted, rank, valid = _sorted_valid(z, mask)
    cumulative = ops.cumsum(z_sorted, axis=-1)
    support = ops.logical_and(valid, 1.0 + rank * z_sorted > cumulative)
    support_size = ops.sum(ops.cast(support, "float32"), axis=-1, keepdims=True)
    support_sum = ops.sum(ops.where(support, z_sorted, 0.0), axis=-1, keepdims=True)
    tau = (support_sum - 1.0) / ops.maximum(support_size, 1.0)
    return _finish(ops.relu(z - tau), mask, dtype, axis)


def entmax15(scores, mask=None, axis: int = -1):
    """1.5-entmax, exact and sort-based: `p_i = max(s_i / 2 - tau, 0) ** 2`.

    `tau` makes the weights sum to one. With `z = s / 2` sorted decreasingly, for each candidate
    support size `k` the threshold solving `sum_{j <= k} (z_(j) - tau)^2 = 1` is
    `tau_k = mean_k - sqrt((1 - k * var_k) / k)` (mean and variance of the top `k`); the support
    size is the number of `k` with `tau_k <= z_(k)` (Peters, Niculae and Martins, 2019, Alg. 2).
    Gradients are those of the closed form on the chosen support, i.e. the implicit derivative
    `dp/ds = (diag(g) - g g^T / sum(g)) / 2` with `g = sqrt(p)`; the support search itself is
    not differentiated.

    Args:
        scores: float tensor, e.g. `(batch, T_q, T_k)`.
        mask: bool tensor broadcastable to `scores`, True where attention is allowed; None = all.
        axis: the axis to normalise over.

    Returns:
        Weights with the dtype of `scores` (computed in float32), summing to one over unmasked
        positions, often exactly zero; exactly zero on masked positions and all zeros on a fully
        masked row.

    Example:

    >>> import numpy as np
    >>> w = entmax15(np.array([[0.0, 1.0, 5.0]]))
    >>> np.round(ops.convert_to_numpy(w), 4).tolist()
    [[0.0, 0.0, 1.0]]
    >>> w = entmax15(np.array([[0.0, 0.5, 1.0]]))
    >>> np.round(ops.convert_to_numpy(w), 4).tolist()
    [[0.0841, 0.2917, 0.6242]]

    References:
        Peters, Niculae and Martins, 2019, "Sparse Sequence-to-Sequence Models",
        arXiv:1905.05702.
    """
    x, mask, dtype = _prepare(scores, mask, axis)
    z = _shift_by_masked_max(x, mask) / 2.0
    z_sorted, rank, valid = _sorted_valid(z, mask)
    # Support search, not differentiated (its square root may sit at 0).
    search = ops.stop_gradient(z_sorted)
    mean = ops.cumsum(search, axis=-1) / rank
    mean_sq = ops.cumsum(ops.square(search), axis=-1) / rank
    delta = (1.0 - rank * (mean_sq - ops.square(mean))) / rank
    tau_k = mean - ops.sqrt(ops.relu(delta))
    support = ops.logical_and(valid, tau_k <= search)
    # Threshold from the sums over the support: differentiable, equal to tau_k at k = |S|.
    size = ops.maximum(ops.sum(ops.cast(support, "float32"), axis=-1, keepdims=True), 1.0)
    sum_1 = ops.sum(ops.where(support, z_sorted, 0.0), axis=-1, keepdims=True)
    sum_2 = ops.sum(ops.where(support, ops.square(z_sorted), 0.0), axis=-1, keepdims=True)
    mean = sum_1 / size
    delta = (1.0 - (sum_2 - sum_1 * mean)) / size
    tau = mean - ops.sqrt(ops.maximum(delta, 1e-12))
    return _finish(ops.square(ops.relu(z - tau)), mask, dtype, axis)


def _entmax_terms(u, positive, exponent):
    """`u ** exponent` and `u ** (exponent - 1)` where `positive`, else 0 (finite gradients)."""
    u_safe = ops.where(positive, u, ops.ones_like(u))
    power = ops.where(positive, ops.power(u_safe, exponent), 0.0)
    slope = ops.where(positive, ops.power(u_safe, exponent - 1.0), 0.0)
    return power, slope


def entmax_bisect(scores, alpha=1.5, mask=None, axis: int = -1, n_iter: int = 50):
    """alpha-entmax for any `alpha > 1`, threshold found by bisection.

    `p_i = max((alpha - 1) s_i - tau, 0) ** (1 / (alpha - 1))` with `tau` such that the weights sum
    to one (Peters, Niculae and Martins, 2019, eq. 10; Blondel et al., 2019). `alpha = 2` is
    sparsemax, `alpha = 1.5` is `entmax15`, `alpha -> 1` tends to softmax. With
    `z = (alpha - 1)(s - max s)`, `tau` lies in `[-1, -(1/n)^(alpha-1)]` (`n` unmasked positions)
    and `n_iter` halvings of that interval find it; the weights are then renormalised.

    Gradients (with respect to the scores and to `alpha`) are the implicit ones: the bisection is
    not differentiated; `tau` is re-attached to the graph as
    `tau* + (g - stop_gradient(g)) / stop_gradient(-dg/dtau)` with `g = sum_i p_i - 1`, which
    leaves its value unchanged and gives `dtau = -(dg/dtheta) / (dg/dtau)`.

    Args:
        scores: float tensor, e.g. `(batch, T_q, T_k)`.
        alpha: a float > 1, or a float tensor (e.g. a trainable weight) of rank 0 or of the rank of
            `scores` with size 1 along `axis`; values must be > 1.
        mask: bool tensor broadcastable to `scores`, True where attention is allowed; None = all.
        axis: the axis to normalise over.
        n_iter: number of bisection steps (float32 resolution is reached after about 25).

    Returns:
        Weights with the dtype of `scores` (computed in float32), summing to one over unmasked
        positions; exactly zero on masked positions and all zeros on a fully masked row.

    Example:

    >>> import numpy as np
    >>> w = entmax_bisect(np.array([[0.1, 1.1, 0.5]]), alpha=2.0)
    >>> np.round(ops.convert_to_numpy(w), 4).tolist()
    [[0.0, 0.8, 0.2]]

    References:
        Peters, Niculae and Martins, 2019, "Sparse Sequence-to-Sequence Models",
        arXiv:1905.05702; Correia, Niculae and Martins, 2019, "Adaptively Sparse Transformers",
        arXiv:1909.00015.
    """
    if isinstance(alpha, (int, float)) and not alpha > 1:
        raise ValueError(f"Expected alpha > 1. Received: alpha={alpha!r}")
    if isinstance(n_iter, bool) or not isinstance(n_iter, int) or n_iter < 1:
        raise ValueError(f"Expected n_iter to be a positive integer. Received: n_iter={n_iter!r}")
    x, mask, dtype = _prepare(scores, mask, axis)
    alpha = ops.cast(ops.convert_to_tensor(alpha), "float32")
    if len(alpha.shape) == len(x.shape) and len(x.shape) > 0:
        alpha = ops.moveaxis(alpha, axis, -1)
    elif len(alpha.shape) != 0:
        raise ValueError(
            "Expected alpha to be a scalar or to have the rank of scores. Received: "
            f"alpha.shape={tuple(alpha.shape)}, scores.shape={tuple(x.shape)}"
        )
    exponent = 1.0 / (alpha - 1.0)
    z = _shift_by_masked_max(x, mask) * (alpha - 1.0)  # unmasked max is 0

    z_fixed, exponent_fixed = ops.stop_gradient(z), ops.stop_gradient(exponent)
    n_valid = ops.maximum(ops.sum(ops.cast(mask, "float32"), axis=-1, keepdims=True), 1.0)
    tau_lo = -ops.ones_like(n_valid)  # sum of weights >= 1 here
    tau_hi = -ops.power(1.0 / n_valid, ops.stop_gradient(alpha - 1.0))  # sum <= 1 here
    width = ops.broadcast_to(tau_hi - tau_lo, ops.shape(tau_lo))

    def bisect(_, state):
        tau_lo, width = state
        width = width / 2.0
        tau_mid = tau_lo + width
        u = z_fixed - tau_mid
        weights, _ = _entmax_terms(u, ops.logical_and(mask, u > 0), exponent_fixed)
        total = ops.sum(weights, axis=-1, keepdims=True)
        return ops.where(total >= 1.0, tau_mid, tau_lo), width

    tau_star, _ = ops.fori_loop(0, n_iter, bisect, (tau_lo, width))
    tau_star = ops.stop_gradient(tau_star)

    # Implicit differentiation: same value as tau_star, gradient -(dg/dtheta) / (dg/dtau).
    u = z - tau_star
    positive = ops.logical_and(mask, u > 0)
    weights, slope = _entmax_terms(u, positive, exponent)
    excess = ops.sum(weights, axis=-1, keepdims=True) - 1.0
    minus_dg_dtau = ops.stop_gradient(exponent * ops.sum(slope, axis=-1, keepdims=True))
    minus_dg_dtau = ops.where(minus_dg_dtau > 0, minus_dg_dtau, ops.ones_like(minus_dg_dtau))
    tau = tau_star + (excess - ops.stop_gradient(excess)) / minus_dg_dtau

    u = z - tau
    weights, _ = _entmax_terms(u, positive, exponent)
    total = ops.sum(weights, axis=-1, keepdims=True)
    weights = weights / ops.where(total > 0, total, ops.ones_like(total))
    return _finish(weights, mask, dtype, axis)


def hardmax(scores, mask=None, axis: int = -1):
    """One-hot of the arg max among unmasked positions (hard attention); ties go to the first.

    The weights are piecewise constant in the scores, so their gradient is zero: it is returned
    as exact zeros (not None), so a model using hard attention still trains its other weights.

    Args:
        scores: float tensor, e.g. `(batch, T_q, T_k)`.
        mask: bool tensor broadcastable to `scores`, True where attention is allowed; None = all.
        axis: the axis to take the arg max over.

    Returns:
        One-hot weights with the dtype of `scores`; a fully masked row gives all zeros.

    Example:

    >>> import numpy as np
    >>> w = hardmax(np.array([[3.0, 1.0, 3.0, 9.0]]), mask=np.array([[True, True, True, False]]))
    >>> ops.convert_to_numpy(w).tolist()
    [[1.0, 0.0, 0.0, 0.0]]
    """
    x, mask, dtype = _prepare(scores, mask, axis)
    neg_inf = ops.full_like(x, float("-inf"))
    row_max = ops.max(ops.where(mask, x, neg_inf), axis=-1, keepdims=True)
    is_max = ops.logical_and(mask, x == row_max)
    first = ops.logical_and(is_max, ops.cumsum(ops.cast(is_max, "int32"), axis=-1) == 1)
    # Zero in value, zero gradient: connects the weights to the scores without changing them.
    zero = 0.0 * (x - ops.stop_gradient(x))
    return _finish(ops.cast(first, "float32") + zero, mask, dtype, axis)
