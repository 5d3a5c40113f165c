"""The attention pipeline shared by the attention structures, with one hook per step."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.mask_passthrough import FirstInputMaskPassthrough
from keras_attn.ops.masking import apply_query_mask, merge_masks


@keras_attn_export("keras_attn.layers.BaseAttention")
class BaseAttention(FirstInputMaskPassthrough, keras.layers.Layer):
    """Base of the attention structures: score -> mask -> distribution -> dropout -> context.

    For queries `(batch, T_q, d_q)`, values `(batch, T_k, d_v)` and keys `(batch, T_k, d_k)`
    (defaulting to the values), `call` runs these steps, each a method a structure overrides:

        key, value, value_mask = _prepare_memory(key, value, value_mask)   the memory units
        scores = _calculate_scores(query, key)            a(k_i, q_t), (batch, T_q, T_k)
        weights = _calculate_weights(scores, ...)         masks, then p(scores), (batch, T_q, T_k)
        dropped = _apply_dropout(weights, training)
        context = _compute_context(dropped, value)        sum_i w_ti v_i, (batch, T_q, d_v)

    and gives padded queries a zero context. When the weights are not returned, a structure may
    instead compute the context in one fused op (`_fused_context`; `Attention` does with the
    scaled dot score and the softmax). The defaults are global attention: the memory as
    given, `self.score_fn(query, key)` (a `keras_attn.scores.Score` a subclass sets in
    `__init__`; `build` builds it), `self.distribution_fn` over the keys allowed by `value_mask`
    and `attention_mask`, no dropout, and `weights @ value`. `Attention` adds a score, a
    distribution and dropout chosen by name; `LocalAttention`, `AreaAttention`, `HardAttention`
    and `CompositionalDeAttention` override the one step in which they differ.

    Call arguments:
        query: `(batch, T_q, d_q)`.
        value: `(batch, T_k, d_v)`.
        key: `(batch, T_k, d_k)`, defaults to `value`.
        query_mask: bool `(batch, T_q)`; padded queries get a zero context. Filled from Keras
            masking when not given.
        value_mask: bool `(batch, T_k)`; padded keys get exactly zero weight. Filled from Keras
            masking when not given.
        attention_mask: bool `(batch, T_q, T_k)`, True where attention is allowed.
        return_attention_scores: also return the weights.
        training: enables dropout (and sampling, for structures that sample).

    Returns:
        `context`, or `(context, weights)` when `return_attention_scores=True`.

    Step-wise use: a recurrent decoder attends with one new query per step to keys that stay
    the same for the whole sentence. It calls `prepare_keys(key)` once per sentence and
    `attention_weights(query, prepared_keys, key_mask, **step_options)` at every step, which
    gives the weights `call` would give for that query (before dropout) without redoing the
    key-only work. `uses_query_positions` says whether the structure takes the step's
    `query_positions` among the `step_options`. A structure that overrides `_calculate_scores`
    or reads the keys in `_calculate_weights` overrides these methods too.

    References:
        Bahdanau, Cho and Bengio, 2015, arXiv:1409.0473; Luong, Pham and Manning, 2015,
        arXiv:1508.04025.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        if not self.score_fn.built:  # A score passed in may be built (and own weights) already.
            self.score_fn.build(query_shape, key_shape)
        self.built = True

    @property
    def uses_query_positions(self) -> bool:
        """Whether `attention_weights` takes `query_positions` (the step index) per step."""
        return False

    def prepare_keys(self, key):
        """The key-only part of the scores, computed once per sentence for `attention_weights`.

        Args:
            key: `(batch, T_k, d_k)`.

        Returns:
            `self.score_fn.prepare_keys(key)`, e.g. the projected keys `K W` of the additive or
            general score.
        """
        return self.score_fn.prepare_keys(key)

    def attention_weights(self, query, prepared_keys, key_mask=None, **step_options):
        """The attention weights `(batch, T_q, T_k)` of `query` over keys prepared once.

        The same weights as `call(..., return_attention_scores=True)` gives for these queries,
        before dropout.

        Args:
            query: `(batch, T_q, d_q)`, at one decoder step usually `T_q = 1`.
            prepared_keys: `prepare_keys(key)`.
            key_mask: bool `(batch, T_k)`; padded keys get exactly zero weight.
            **step_options: extra call arguments of the structure, e.g. `query_positions`
                `(batch, T_q)` for `LocalAttention`'s local-m.

        Returns:
            Weights `(batch, T_q, T_k)` in the compute dtype.
        """
        scores = self.score_fn.score(query, prepared_keys)
        return self._calculate_weights(
            scores,
            query=query,
            key=prepared_keys,
            query_mask=None,
            value_mask=key_mask,
            attention_mask=None,
            training=None,
            **step_options,
        )

    def _fused_context(
        self, query, value, key, *, query_mask, value_mask, attention_mask, training
    ):
        """The context `(batch, T_q, d_v)` in one fused op, or None to run the pipeline (the
        default). Called with `call`'s arguments when the weights are not returned."""
        return None

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
    ):
        if not return_attention_scores:
            context = self._fused_context(
                query,
                value,
                key,
                query_mask=query_mask,
                value_mask=value_mask,
                attention_mask=attention_mask,
                training=training,
            )
            if context is not None:
                return context
        context, weights = self._compute_attention(
            query,
            value,
            key,
            query_mask=query_mask,
            value_mask=value_mask,
            attention_mask=attention_mask,
            training=training,
        )
        return (context, weights) if return_attention_scores else context

    def _compute_attention(
        self, query, value, key, *, query_mask, value_mask, training, attention_mask=None, **options
    ):
        """The whole pipeline: `(context, weights)`, the weights before dropout.

        Takes `call`'s arguments (`key` may be None); `options` are extra call arguments of a
        structure (e.g. `query_positions`), handed to `_calculate_weights`.
        """
        key = value if key is None else key
        key, value, value_mask = self._prepare_memory(key, value, value_mask)
        scores = self._calculate_scores(query, key)
        weights = self._calculate_weights(
            scores,
            query=query,
            key=key,
            query_mask=query_mask,
            value_mask=value_mask,
            attention_mask=attention_mask,
            training=training,
            **options,
        )
        context = self._compute_context(self._apply_dropout(weights, training), value)
        return apply_query_mask(context, query_mask), weights

    def _prepare_memory(self, key, value, value_mask):
        """The memory units attended to: `(key, value, value_mask)`, by default as given."""
        return key, value, value_mask

    def _calculate_scores(self, query, key):
        """Alignment scores `(batch, T_q, T_k)` of every query against every key."""
        return self.score_fn(query, key)

    def _calculate_weights(
        self, scores, *, query, key, query_mask, value_mask, attention_mask, training, **options
    ):
        """Attention weights `(batch, T_q, T_k)` from the scores: masked keys get exactly 0."""
        mask = merge_masks(value_mask=value_mask, attention_mask=attention_mask)
        return self.distribution_fn(scores, attention_mask=mask)

    def _apply_dropout(self, weights, training):
        """The weights used for the context during training; no dropout by default."""
        return weights

    def _compute_context(self, weights, value):
        """`sum_i w_ti v_i`: `(batch, T_q, T_k) x (batch, T_k, d_v) -> (batch, T_q, d_v)`."""
        return ops.einsum("bqk,bkd->bqd", weights, ops.cast(value, weights.dtype))
