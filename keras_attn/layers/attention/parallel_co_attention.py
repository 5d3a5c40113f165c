"""Parallel co-attention (Lu et al., 2016): image regions and question words attend to each other
at once, through one affinity matrix."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn import distributions
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import check_positive_int
from keras_attn.layers.attention.co_attention import CoAttention


@keras_attn_export("keras_attn.layers.ParallelCoAttention")
class ParallelCoAttention(keras.layers.Layer):
    """Parallel co-attention: image regions and question words attend to each other at once.

    With region features `V` `(batch, L, d_v)` and word features `Q` `(batch, T, d_q)`, a
    `keras_attn.layers.CoAttention` affinity `C = V^T W_b Q` `(batch, L, T)`, normalised over
    the words (`A_v`) and over the regions (`A_q`), carries each side's features to the other:

        H^v = tanh(W_v V + W_q (A_v Q))          (batch, L, k)
        H^q = tanh(W_q Q + W_v (A_q^T V))        (batch, T, k)
        a^v = softmax_L(H^v w_hv)                (batch, L)
        a^q = softmax_T(H^q w_hq)                (batch, T)   over the real words only
        v_hat = sum_i a^v_i v_i                  (batch, d_v)
        q_hat = sum_t a^q_t q_t                  (batch, d_q)

    Lu et al.'s eq. (3)-(4) with the affinity normalised by a softmax before it transfers
    features (`tanh(Q^T W_b V)` in the paper): `W_v` and `W_q` are shared by both maps, as
    there.

    Args:
        units: `k`, the width of the attention maps `H^v` and `H^q`.
        score: the affinity, a `keras_attn.scores` name or instance (default `"general"`, the
            bilinear `v^T W_b q`).

    Call arguments:
        regions: `V` `(batch, L, d_v)`.
        words: `Q` `(batch, T, d_q)`.
        words_mask: bool `(batch, T)`, True at real words; filled from Keras masking. A
            question without words gives `q_hat = 0` and region weights from the image alone.
        return_attention_scores: also return the weights.

    Returns:
        `(v_hat, q_hat)`, or `((v_hat, q_hat), (a^v, a^q))` with `a^v` `(batch, L)` and `a^q`
        `(batch, T)` float32 when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = ParallelCoAttention(8)
    >>> regions = np.random.rand(2, 16, 6).astype("float32")
    >>> words = np.random.rand(2, 5, 4).astype("float32")
    >>> (v_hat, q_hat), (a_v, a_q) = layer(regions, words, return_attention_scores=True)
    >>> tuple(v_hat.shape), tuple(q_hat.shape), tuple(a_v.shape), tuple(a_q.shape)
    ((2, 6), (2, 4), (2, 16), (2, 5))

    References:
        Lu, Yang, Batra and Parikh, 2016, "Hierarchical Question-Image Co-Attention for Visual
        Question Answering", arXiv:1606.00061, section 3.3 (parallel co-attention).
    """

    def __init__(self, units: int, score="general", **kwargs):
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        self.score = score
        self.supports_masking = True

    def build(self, regions_shape, words_shape):
        policy = self.dtype_policy
        self.co_attention = CoAttention(score=self.score, dtype=policy, name="co_attention")
        self.region_projection = keras.layers.Dense(
            self.units, use_bias=False, dtype=policy, name="region_projection"
        )  # W_v
        self.word_projection = keras.layers.Dense(
            self.units, use_bias=False, dtype=policy, name="word_projection"
        )  # W_q
        self.region_score = keras.layers.Dense(
            1, use_bias=False, dtype=policy, name="region_score"
        )  # w_hv
        self.word_score = keras.layers.Dense(1, use_bias=False, dtype=policy, name="word_score")
        self.softmax = distributions.get("softmax", dtype=policy)
        self.co_attention.build(regions_shape, words_shape)
        self.region_projection.build(regions_shape)
        self.word_projection.build(words_shape)
        self.region_score.build((None, None, self.units))
        self.word_score.build((None, None, self.units))
        self.built = True

    def call(self, regions, words, words_mask=None, return_attention_scores=False):
        regions = ops.cast(regions, self.compute_dtype)
        words = ops.cast(words, self.compute_dtype)
        # (batch, L, d_q) words seen by each region, (batch, T, d_v) regions seen by each word
        words_seen, regions_seen = self.co_attention(regions, words, b_mask=words_mask)
        region_map = ops.tanh(
            self.region_projection(regions) + self.word_projection(words_seen)
        )  # H^v (batch, L, k)
        word_map = ops.tanh(
            self.word_projection(words) + self.region_projection(regions_seen)
        )  # H^q (batch, T, k)
        # (batch, L, k) -> (batch, 1, L): one row of scores over the regions
        region_scores = ops.transpose(self.region_score(region_map), (0, 2, 1))
        word_scores = ops.transpose(self.word_score(word_map), (0, 2, 1))  # (batch, 1, T)
        word_keep = None if words_mask is None else ops.expand_dims(words_mask, 1)
        region_weights = ops.cast(self.softmax(region_scores)[:, 0], "float32")  # (batch, L)
        word_weights = ops.cast(
            self.softmax(word_scores, attention_mask=word_keep)[:, 0], "float32"
        )  # (batch, T)
        # (batch, L) x (batch, L, d_v) -> (batch, d_v)
        v_hat = ops.einsum("bl,bld->bd", ops.cast(region_weights, regions.dtype), regions)
        q_hat = ops.einsum("bt,btd->bd", ops.cast(word_weights, words.dtype), words)
        if return_attention_scores:
            return (v_hat, q_hat), (region_weights, word_weights)
        return v_hat, q_hat

    def compute_mask(self, regions, previous_mask=None):
        return None

    def get_config(self) -> dict:
        config = super().get_config()
        score = self.score
        if not isinstance(score, str):
            score = keras.saving.serialize_keras_object(score)
        config.update(units=self.units, score=score)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("score"), dict):
            config["score"] = keras.saving.deserialize_keras_object(config["score"])
        return cls(**config)
