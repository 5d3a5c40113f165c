"""Luong's concat score."""

from __future__ import annotations

from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.scores.additive_score import AdditiveScore


@keras_attn_export("keras_attn.scores.ConcatScore")
class ConcatScore(AdditiveScore):
    """Concat score `a(k_i, q) = v^T act(W [q; k_i] + b)` (Luong's "concat").

    One kernel `W` `(d_q + d_k, units)` over the concatenation `[q; k_i]`. Since
    `W [q; k] = W[:d_q] q + W[d_q:] k`, it is applied in two slices and never materialises the
    `(batch, T_q, T_k, d_q + d_k)` concatenation; it equals `AdditiveScore` with
    `W_1 = W[:d_q]`, `W_2 = W[d_q:]`.

    Args: as `AdditiveScore`.

    References:
        Luong, Pham and Manning, 2015, arXiv:1508.04025, eq. (8) "concat".
    """

    def _build_projections(self, query_shape, keys_shape, units):
        self._query_size = query_shape[-1]
        self.kernel = self.add_weight(
            name="kernel",
            shape=(query_shape[-1] + keys_shape[-1], units),
            initializer=clone_initializer(self.kernel_initializer),
        )

    def _query_projection(self, query):
        return ops.matmul(query, self.kernel[: self._query_size])

    def _key_projection(self, keys):
        return ops.matmul(keys, self.kernel[self._query_size :])
