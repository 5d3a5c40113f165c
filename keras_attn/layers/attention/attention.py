"""Global (soft) attention built from a score function and a distribution."""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_attn import distributions, scores
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.attention.base_attention import BaseAttention
from keras_attn.ops.fused_attention import dot_product_attention, fused_attention_by_default
from keras_attn.ops.masking import apply_query_mask, merge_masks

# The pipeline steps the fused path replaces; a subclass that overrides one keeps the explicit path.
_PIPELINE = (
    "_compute_attention",
    "_prepare_memory",
    "_calculate_scores",
    "_calculate_weights",
    "_apply_dropout",
    "_compute_context",
)


@keras_attn_export("keras_attn.layers.Attention")
class Attention(BaseAttention):
    """Global attention: `c_t = sum_i p(a(k_i, q_t))_i v_i` (Bahdanau et al.; Luong et al.).

    Shapes: query `(batch, T_q, d_q)`, value `(batch, T_k, d_v)`, key `(batch, T_k, d_k)`
    (defaults to value). Scores and weights are `(batch, T_q, T_k)`; the context is
    `(batch, T_q, d_v)`. The pipeline and its hooks are those of `BaseAttention`; this layer
    picks the score function, the distribution and the dropout.

    Fused path: with `score="scaled_dot"` and `distribution="softmax"` (Luong's dot score scaled
    by `1 / sqrt(d_k)`, Vaswani et al.) and values as wide as the keys (`d_v = d_k`), when the
    weights are not returned and no dropout is active, the context can be computed by one call
    of `keras.ops.dot_product_attention` (`keras_attn.ops.dot_product_attention`), which is flash
    attention (Dao et al., 2022) where the backend and device have a kernel for it.
    `use_fused_attention=None` takes it on JAX and PyTorch and keeps the explicit path on
    TensorFlow; `True` takes it on every backend, `False` never. Both paths compute the same
    context (masks; logits and softmax in float32; a query whose keys are all masked gets a zero
    context). Other scores and distributions, and subclasses that override a step of the
    pipeline, always take the explicit path.

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
        use_fused_attention: None (automatic: the fused path on JAX and PyTorch), True or False;
            see "Fused path" above. The fused path is only taken where it applies.

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
        arXiv:1508.04025; Vaswani et al., 2017, arXiv:1706.03762; Dao et al., 2022,
        "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness",
        arXiv:2205.14135.
    """

    def __init__(
        self,
        score="dot",
        distribution="softmax",
        dropout: float = 0.0,
        use_fused_attention: bool | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"Expected dropout in [0, 1). Received: dropout={dropout!r}")
        if use_fused_attention is not None and not isinstance(use_fused_attention, bool):
            raise ValueError(
                "Expected use_fused_attention in {None, True, False}. "
                f"Received: use_fused_attention={use_fused_attention!r}"
            )
        self.use_fused_attention = use_fused_attention
        self.score = score
        self.distribution = distribution
        self.dropout = float(dropout)
        self.score_fn = scores.get(score, dtype=self.dtype_policy)
        self.distribution_fn = distributions.get(distribution, dtype=self.dtype_policy)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)

    def uses_fused_attention(self, return_attention_scores: bool = False, training=None) -> bool:
        """Whether a call with these arguments takes the fused path (see the class docstring).

        The fused path applies to the scaled dot score with the softmax, when the weights are not
        returned and no dropout is active (and, in a call, the values are as wide as the keys).
        It is taken where it applies if `use_fused_attention` is True, or if it is None and the
        backend is JAX or PyTorch (`keras_attn.ops.fused_attention_by_default()`).
        """
        applies = (
            type(self.score_fn) is scores.ScaledDotScore
            and type(self.distribution_fn) is distributions.Softmax
            and all(getattr(type(self), step) is getattr(Attention, step) for step in _PIPELINE)
            and not return_attention_scores
            and not (self.dropout > 0.0 and bool(training))
        )
        if not applies:
            return False
        if self.use_fused_attention is None:
            return fused_attention_by_default()
        return self.use_fused_attention

    def _fused_context(
        self, query, value, key, *, query_mask, value_mask, attention_mask, training
    ):
        key = value if key is None else key
        if not self.uses_fused_attention(training=training) or value.shape[-1] != key.shape[-1]:
            return None  # the fused op needs d_v = d_k
        mask = merge_masks(value_mask=value_mask, attention_mask=attention_mask)
        if mask is not None:
            mask = ops.expand_dims(mask, 1)  # (batch, 1, T_q | 1, T_k): one head
        # (batch, T, d) -> (batch, T, 1, d): one head
        query, key, value = (
            ops.expand_dims(ops.cast(t, self.compute_dtype), 2) for t in (query, key, value)
        )
        scale = 1.0 / math.sqrt(key.shape[-1])
        context = dot_product_attention(query, key, value, mask=mask, scale=scale)
        return apply_query_mask(ops.squeeze(context, 2), query_mask)

    def _apply_dropout(self, weights, training):
        return self.dropout_layer(weights, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(self, "score", "distribution", "dropout", "use_fused_attention")
        )
        return config
