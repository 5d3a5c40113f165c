"""Global (soft) attention built from a score function and a distribution."""

from __future__ import annotations

import keras

from keras_attn import distributions, scores
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.attention.base_attention import BaseAttention


@keras_attn_export("keras_attn.layers.Attention")
class Attention(BaseAttention):
    """Global attention: `c_t = sum_i p(a(k_i, q_t))_i v_i` (Bahdanau et al.; Luong et al.).

    Shapes: query `(batch, T_q, d_q)`, value `(batch, T_k, d_v)`, key `(batch, T_k, d_k)`
    (defaults to value). Scores and weights are `(batch, T_q, T_k)`; the context is
    `(batch, T_q, d_v)`. The pipeline and its hooks are those of `BaseAttention`; this layer
    picks the score function, the distribution and the dropout.

    Args:
        score: alignment function, a name from `keras_attn.scores.SCORES`
            (`"cosine"`, `"dot"`, `"scaled_dot"`, `"general"`, `"scaled_general"`,
            `"residual_general"`, `"biased_general"`, `"activated_general"`, `"concat"`,
            `"additive"`, `"deep"`, `"location"`, `"feature"`) or a `keras_attn.scores.Score`
            instance.
        distribution: a name from `keras_attn.distributions.DISTRIBUTIONS` (`"softmax"`,
            `"sigmoid"`, `"sparsemax"`, `"entmax15"`, `"entmax"`, `"hardmax"`) or a
            `keras_attn.distributions.Distribution` instance.
        dropout: dropout rate on the attention weights during training.

    Call arguments:
        query, value, key: the tensors above.
        query_mask: bool `(batch, T_q)`; padded queries get a zero context. Filled from Keras
            masking when not given.
        value_mask: bool `(batch, T_k)`; padded keys get exactly zero weight. Filled from Keras
            masking when not given.
        attention_mask: bool `(batch, T_q, T_k)`, True where attention is allowed.
        return_attention_scores: also return the weights.
        training: enables dropout.

    Returns:
        `context`, or `(context, weights)` when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = Attention(score="dot")
    >>> q = np.random.rand(2, 3, 4).astype("float32"); v = np.random.rand(2, 5, 4).astype("float32")
    >>> context, weights = layer(q, v, return_attention_scores=True)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 3, 4), (2, 3, 5))

    References:
        Bahdanau, Cho and Bengio, 2015, arXiv:1409.0473; Luong, Pham and Manning, 2015,
        arXiv:1508.04025.
    """

    def __init__(self, score="dot", distribution="softmax", dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"Expected dropout in [0, 1). Received: dropout={dropout!r}")
        self.score = score
        self.distribution = distribution
        self.dropout = float(dropout)
        self.score_fn = scores.get(score, dtype=self.dtype_policy)
        self.distribution_fn = distributions.get(distribution, dtype=self.dtype_policy)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)

    def _apply_dropout(self, weights, training):
        return self.dropout_layer(weights, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(serialize_arguments(self, "score", "distribution", "dropout"))
        return config
