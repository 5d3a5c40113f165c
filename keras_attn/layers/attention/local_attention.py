"""Luong's local attention: attend to a window of 2D + 1 source positions around p_t."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.attention.attention import Attention
from keras_attn.ops.gradients import scale_gradient
from keras_attn.ops.masking import merge_masks

MODES = ("monotonic", "predictive")


def check_position_gradient_scale(value) -> None:
    """Raise a ValueError unless `value` is a positive finite number."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0.0 < value < float("inf")
    ):
        raise ValueError(
            "Expected position_gradient_scale to be a positive finite number. "
            f"Received: position_gradient_scale={value!r}"
        )


@keras_attn_export("keras_attn.layers.LocalAttention")
class LocalAttention(Attention):
    """Local attention over the window `[p_t - D, p_t + D]` (Luong et al., 2015, section 3.2).

    For query `t` and source position `s` (0-based), with queries `(batch, T_q, d_q)` and keys and
    values `(batch, T_k, d)`:

    - `mode="monotonic"` (local-m): `p_t = t`, the query's position, or `query_positions[b, t]`
      when given. `a_t(s) = p(score(h_t, h_s))` over the keys with `|s - p_t| <= D`.
    - `mode="predictive"` (local-p): `p_t = S * sigmoid(v_p^T tanh(W_p h_t))` with `S` the source
      length of the example (its number of real keys, from the value mask; `T_k` without one),
      `W_p` `(d_q, units)` and `v_p` `(units,)` learned, and
      `a_t(s) = p(score(h_t, h_s))_s * exp(-(s - p_t)^2 / (2 sigma^2))`, `sigma = D / 2`, again
      over `|s - p_t| <= D` (eq. 10). As in the paper the Gaussian factor is not renormalised.

    `p` (softmax by default) is taken over the window's real keys only; keys outside the window
    and padded keys get exactly zero weight, and a window with no real key gives all-zero weights.
    The context is `c_t = sum_s a_t(s) v_s` `(batch, T_q, d_v)`; the weights are
    `(batch, T_q, T_k)`. Luong et al. use the "general" score for their best local model. The
    pipeline is `Attention`'s; the window (and local-p's Gaussian) is its weights step,
    `window_weights`.

    Args:
        mode: `"monotonic"` (local-m) or `"predictive"` (local-p).
        window: `D`, a non-negative integer (positive for local-p); the window holds up to
            `2D + 1` keys.
        score: a name from `keras_attn.scores.SCORES` or a `keras_attn.scores.Score` instance.
        distribution: `"softmax"` or a `keras_attn.distributions.Distribution` instance.
        units: size of the hidden layer `W_p` of local-p; defaults to the query size. Ignored
            by local-m.
        dropout: dropout rate on the attention weights during training.
        kernel_initializer: initializer of `W_p` and `v_p`.
        position_gradient_scale: a positive factor on the gradients of `W_p` and `v_p` (local-p
            only; the forward pass is unchanged). Under plain SGD it is that factor on their
            learning rate: a rate that suits the rest of a translator can drive
            `v_p^T tanh(W_p h_t)` far enough that the sigmoid saturates and `p_t` sticks at one
            end of every sentence, where its gradient vanishes. Gradient clipping sees the
            scaled gradients. Adam's steps do not depend on the gradient's scale, so there it
            does next to nothing. Ignored by local-m.

    Call arguments:
        query: `(batch, T_q, d_q)`, the decoder states `h_t`.
        value: `(batch, T_k, d_v)`, the source states.
        key: `(batch, T_k, d_k)`, defaults to `value`.
        query_mask: bool `(batch, T_q)`; padded queries get a zero context. Filled from Keras
            masking when not given.
        value_mask: bool `(batch, T_k)`; padded keys get exactly zero weight and set `S`. Filled
            from Keras masking when not given.
        query_positions: local-m only, `(batch, T_q)` numbers, the aligned positions `p_t` of
            the queries. Defaults to `0, 1, ..., T_q - 1`; a step-wise decoder that calls the layer
            with one query at a time passes its step index here (shape `(batch, 1)`).
        return_attention_scores: also return the weights.
        training: enables dropout.

    Returns:
        `context`, or `(context, weights)` when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = LocalAttention(mode="monotonic", window=1, score="dot")
    >>> q = np.ones((1, 4, 2), "float32"); v = np.ones((1, 4, 2), "float32")
    >>> context, weights = layer(q, v, return_attention_scores=True)
    >>> np.round(weights.numpy()[0], 3).tolist()[0]
    [0.5, 0.5, 0.0, 0.0]

    References:
        Luong, Pham and Manning, 2015, "Effective Approaches to Attention-based Neural Machine
        Translation", arXiv:1508.04025, section 3.2, eqs. (9)-(10).
    """

    def __init__(
        self,
        mode: str = "monotonic",
        window: int = 2,
        score="general",
        distribution="softmax",
        units: int | None = None,
        dropout: float = 0.0,
        kernel_initializer="glorot_uniform",
        position_gradient_scale: float = 1.0,
        **kwargs,
    ):
        if mode not in MODES:
            raise ValueError(f"Expected mode in {MODES}. Received: mode={mode!r}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 0:
            raise ValueError(
                f"Expected window to be a non-negative integer. Received: window={window!r}"
            )
        if mode == "predictive" and window == 0:
            raise ValueError(
                "Expected window >= 1 with mode='predictive' (sigma = D / 2 must be positive). "
                f"Received: window={window!r}"
            )
        if units is not None and (
            isinstance(units, bool) or not isinstance(units, int) or units <= 0
        ):
            raise ValueError(
                f"Expected units to be a positive integer or None. Received: units={units!r}"
            )
        check_position_gradient_scale(position_gradient_scale)
        super().__init__(score=score, distribution=distribution, dropout=dropout, **kwargs)
        self.mode = mode
        self.window = window
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.position_gradient_scale = float(position_gradient_scale)

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        if self.mode == "predictive":
            units = self.units if self.units is not None else query_shape[-1]
            self.position_kernel = self.add_weight(
                name="position_kernel",
                shape=(query_shape[-1], units),
                initializer=clone_initializer(self.kernel_initializer),
            )
            self.position_v = self.add_weight(
                name="position_v",
                shape=(units,),
                initializer=clone_initializer(self.kernel_initializer),
            )

    def _aligned_positions(self, query, value_mask, query_positions):
        """`p_t` `(batch, T_q)` in float32."""
        if self.mode == "monotonic":
            if query_positions is not None:
                return ops.cast(query_positions, "float32")
            steps = ops.cast(ops.arange(ops.shape(query)[1]), "float32")
            return ops.broadcast_to(ops.expand_dims(steps, 0), ops.shape(query)[:2])
        kernel = scale_gradient(
            ops.cast(self.position_kernel, query.dtype), self.position_gradient_scale
        )
        v = scale_gradient(ops.cast(self.position_v, query.dtype), self.position_gradient_scale)
        # (batch, T_q, d_q) x (d_q, units) -> (batch, T_q, units) -> (batch, T_q)
        hidden = ops.tanh(ops.matmul(query, kernel))
        logits = ops.einsum("bqu,u->bq", hidden, v)
        length = ops.sum(ops.cast(value_mask, "float32"), axis=-1, keepdims=True)  # S, (batch, 1)
        return length * ops.sigmoid(ops.cast(logits, "float32"))

    def window_weights(self, raw_scores, query, value_mask=None, query_positions=None):
        """The window weights `a_t(s)` `(batch, T_q, T_k)` from raw scores, before dropout.

        The weights step of the pipeline (`attention_weights` reaches it too):
        `raw_scores` `(batch, T_q, T_k)`, `query` `(batch, T_q, d_q)` (local-p predicts `p_t`
        from it), `value_mask` bool `(batch, T_k)` or None, `query_positions` as in `call`.
        """
        if value_mask is None:
            value_mask = ops.ones((ops.shape(raw_scores)[0], ops.shape(raw_scores)[2]), "bool")
        positions = self._aligned_positions(query, value_mask, query_positions)
        # (1, 1, T_k) - (batch, T_q, 1) -> (batch, T_q, T_k): distance of every key from p_t.
        source = ops.cast(ops.arange(ops.shape(raw_scores)[2]), "float32")
        offset = source[None, None, :] - ops.expand_dims(positions, -1)
        in_window = ops.less_equal(ops.abs(offset), float(self.window))
        mask = merge_masks(value_mask=value_mask, attention_mask=in_window)
        weights = self.distribution_fn(raw_scores, attention_mask=mask)
        if self.mode == "predictive":
            sigma = self.window / 2.0
            gaussian = ops.exp(-ops.square(offset) / (2.0 * sigma**2))
            weights = ops.cast(ops.cast(weights, "float32") * gaussian, weights.dtype)
        return weights

    @property
    def uses_query_positions(self) -> bool:
        """local-m aligns a query with its step, `p_t = t`: a step-wise caller passes `t`."""
        return self.mode == "monotonic"

    def _calculate_weights(self, scores, *, query, value_mask, query_positions=None, **kwargs):
        return self.window_weights(scores, query, value_mask, query_positions)

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        query_positions=None,
        return_attention_scores=False,
        training=None,
    ):
        if query_positions is not None and self.mode != "monotonic":
            raise ValueError(
                "query_positions is only used by mode='monotonic'; local-p predicts p_t. "
                f"Received: mode={self.mode!r}"
            )
        context, weights = self._compute_attention(
            query,
            value,
            key,
            query_mask=query_mask,
            value_mask=value_mask,
            training=training,
            query_positions=query_positions,
        )
        return (context, weights) if return_attention_scores else context

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self, "mode", "window", "units", "kernel_initializer", "position_gradient_scale"
            )
        )
        return config
