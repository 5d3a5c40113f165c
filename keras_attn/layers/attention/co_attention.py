"""Co-attention: two sequences attend to each other through one affinity matrix."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn import distributions, scores
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments


@keras_attn_export("keras_attn.layers.CoAttention")
class CoAttention(keras.layers.Layer):
    """Co-attention: one affinity matrix normalised both ways gives a context for each sequence.

    For sequences `a` `(batch, T_a, d_a)` and `b` `(batch, T_b, d_b)`:

        L = score(a, b)                  (batch, T_a, T_b), e.g. L_ij = a_i^T W b_j
        A_a = p over j of L              (batch, T_a, T_b)   each a_i attends over b
        A_b = p over i of L              (batch, T_a, T_b)   each b_j attends over a
        C_a = A_a b                      (batch, T_a, d_b)
        C_b = A_b^T a                    (batch, T_b, d_a)

    with `p` the distribution (softmax by default, taken in float32). Both normalisations see
    only pairs of real positions: padded positions of either sequence get exactly zero weight,
    and the contexts of padded positions are zero (a fully padded sequence gives zero weights and
    zero contexts, never NaN). With `a` the document and `b` the question this is the first level
    of the Dynamic Coattention Network (its `C^Q = D A^Q` is `C_b`).

    `second_level=True` is DCN's second level, `C^D = [Q; C^Q] A^D`: each `a_i` attends with the
    same weights `A_a` over the question words and over their attention summaries of `a`,

        C_a = A_a [b, C_b]               (batch, T_a, d_b + d_a)

    i.e. `[A_a b, A_a C_b]` concatenated on the feature axis, `b`'s features first as in
    `[Q; C^Q]`; `C_b` is unchanged.

    Args:
        score: the affinity function, a name from `keras_attn.scores.SCORES` (`"dot"` is DCN's
            `L = D^T Q`, `"general"` the bilinear `a^T W b` of Lu et al.'s affinity matrix,
            `"concat"`, `"additive"`, …) or a `keras_attn.scores.Score` instance.
        distribution: `p`, a name from `keras_attn.distributions.DISTRIBUTIONS` (`"softmax"`,
            `"sparsemax"`, …) or a `keras_attn.distributions.Distribution` instance; the same
            object normalises both directions.
        second_level: also attend over `C_b` in `C_a` (DCN's coattention context `C^D`).

    Call arguments:
        a: `(batch, T_a, d_a)`.
        b: `(batch, T_b, d_b)`.
        a_mask: bool `(batch, T_a)`, True at real positions; filled from Keras masking.
        b_mask: bool `(batch, T_b)`, likewise.
        return_attention_scores: also return the weights.

    Returns:
        `(context_a, context_b)` (`context_a` `(batch, T_a, d_b)`, or `(batch, T_a, d_b + d_a)`
        with `second_level=True`), or `((context_a, context_b), weights)` when
        `return_attention_scores=True`, where `weights` `(batch, 2, T_a, T_b)` stacks both
        normalisations of `L` in its layout: `weights[:, 0]` is `A_a` (rows sum to one over `b`)
        and `weights[:, 1]` is `A_b` (columns sum to one over `a`).

    Example:

    >>> import numpy as np
    >>> layer = CoAttention(score="general")
    >>> a = np.random.rand(2, 3, 4).astype("float32"); b = np.random.rand(2, 5, 6).astype("float32")
    >>> (context_a, context_b), weights = layer(a, b, return_attention_scores=True)
    >>> tuple(context_a.shape), tuple(context_b.shape), tuple(weights.shape)
    ((2, 3, 6), (2, 5, 4), (2, 2, 3, 5))

    References:
        Xiong, Zhong and Socher, 2017, "Dynamic Coattention Networks for Question Answering",
        arXiv:1611.01604, section 2.2; Lu, Yang, Batra and Parikh, 2016, "Hierarchical
        Question-Image Co-Attention for Visual Question Answering", arXiv:1606.00061, section 3.3.
    """

    def __init__(self, score="general", distribution="softmax", second_level=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(second_level, bool):
            raise ValueError(
                f"Expected second_level to be a bool. Received: second_level={second_level!r}"
            )
        self.second_level = second_level
        self.score = score
        self.distribution = distribution
        self.score_fn = scores.get(score, dtype=self.dtype_policy)
        self.distribution_fn = distributions.get(distribution, dtype=self.dtype_policy)
        self.supports_masking = True

    def build(self, a_shape, b_shape):
        self.score_fn.build(a_shape, b_shape)
        self.built = True

    def call(self, a, b, a_mask=None, b_mask=None, return_attention_scores=False):
        affinity = self.score_fn(a, b)  # (batch, T_a, T_b)
        mask = None
        if a_mask is not None or b_mask is not None:
            # (batch, T_a, 1) & (batch, 1, T_b) -> (batch, T_a, T_b): pairs of real positions.
            a_keep = ops.ones_like(a[..., 0], "bool") if a_mask is None else a_mask
            b_keep = ops.ones_like(b[..., 0], "bool") if b_mask is None else b_mask
            mask = ops.logical_and(
                ops.expand_dims(ops.cast(a_keep, "bool"), -1),
                ops.expand_dims(ops.cast(b_keep, "bool"), -2),
            )
        weights_a = self.distribution_fn(affinity, attention_mask=mask)
        # Normalise over a: (batch, T_b, T_a) rows, transposed back to (batch, T_a, T_b).
        mask_t = None if mask is None else ops.transpose(mask, (0, 2, 1))
        weights_b = self.distribution_fn(ops.transpose(affinity, (0, 2, 1)), attention_mask=mask_t)
        weights_b = ops.transpose(weights_b, (0, 2, 1))
        # (batch, T_a, T_b) x (batch, T_b, d_b) -> (batch, T_a, d_b)
        context_a = ops.einsum("bij,bjd->bid", weights_a, ops.cast(b, weights_a.dtype))
        # (batch, T_a, T_b) x (batch, T_a, d_a) -> (batch, T_b, d_a)
        context_b = ops.einsum("bij,bid->bjd", weights_b, ops.cast(a, weights_b.dtype))
        if self.second_level:
            # DCN's C^D = [Q; C^Q] A^D: (batch, T_a, T_b) x (batch, T_b, d_a) -> (batch, T_a, d_a)
            summaries = ops.einsum("bij,bjd->bid", weights_a, context_b)
            context_a = ops.concatenate([context_a, summaries], axis=-1)
        if return_attention_scores:
            return (context_a, context_b), ops.stack([weights_a, weights_b], axis=1)
        return context_a, context_b

    def compute_mask(self, a, previous_mask=None):
        # Keras passes only the first input and its mask: C_a keeps a's positions and mask;
        # b's Keras mask never reaches compute_mask, so C_b carries none (pass b_mask on by hand).
        return previous_mask, None

    def get_config(self):
        config = super().get_config()
        config.update(serialize_arguments(self, "score", "distribution", "second_level"))
        return config
