"""Float64 NumPy references of the sparse attention distributions, row by row over the last axis.

Each reference works on the unmasked entries of a row only and writes 0 elsewhere; a fully masked
row gives zeros. They are written from the papers' definitions, independently of the Keras code:
sparsemax by its sort-based threshold (Martins and Astudillo, 2016, Alg. 1), alpha-entmax by
bisection on its defining equation `sum_i max((alpha - 1) z_i - tau, 0) ** (1 / (alpha - 1)) = 1`
(Peters et al., 2019, eq. 10) to machine precision.
"""

from __future__ import annotations

import numpy as np


def _rows(scores, mask, fn):
    scores = np.asarray(scores, "float64")
    mask = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
    out = np.zeros_like(scores)
    flat_s, flat_m, flat_o = (a.reshape(-1, scores.shape[-1]) for a in (scores, mask, out))
    for row in range(flat_s.shape[0]):
        if flat_m[row].any():
            flat_o[row, flat_m[row]] = fn(flat_s[row, flat_m[row]])
    return flat_o.reshape(scores.shape)


def sparsemax_threshold(z: np.ndarray) -> float:
    """tau of one row: `(sum_{j<=k} z_(j) - 1) / k` at the largest k with `1 + k z_(k) > cumsum`."""
    z_sorted = np.sort(z)[::-1]
    k = np.arange(1, z.size + 1)
    cumulative = np.cumsum(z_sorted)
    k_star = k[1 + k * z_sorted > cumulative].max()
    return (cumulative[k_star - 1] - 1) / k_star


def sparsemax(scores, mask=None):
    return _rows(scores, mask, lambda z: np.maximum(z - sparsemax_threshold(z), 0))


def entmax_threshold(z: np.ndarray, alpha: float) -> float:
    """tau of one row for alpha-entmax, by bisection on the defining equation (float64)."""
    x = (alpha - 1) * (z - z.max())

    def total(tau):
        return np.sum(np.maximum(x - tau, 0) ** (1 / (alpha - 1)))

    lo, hi = -1.0, 0.0  # total(lo) >= 1 >= total(hi)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if total(mid) >= 1 else (lo, mid)
    return (lo + hi) / 2


def entmax(scores, alpha: float, mask=None):
    def row(z):
        x = (alpha - 1) * (z - z.max())
        return np.maximum(x - entmax_threshold(z, alpha), 0) ** (1 / (alpha - 1))

    return _rows(scores, mask, row)


def simplex_projection(z: np.ndarray) -> np.ndarray:
    """argmin_{p >= 0, sum p = 1} ||p - z||^2 of one row, by bisection on the KKT multiplier."""
    lo, hi = z.min() - 1.0, z.max()
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.maximum(z - mid, 0).sum() >= 1 else (lo, mid)
    return np.maximum(z - (lo + hi) / 2, 0)
