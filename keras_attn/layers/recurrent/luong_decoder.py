"""Luong's attention decoder: attention from the current state, attentional state fed back."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn import distributions, scores
from keras_attn.api_export import keras_attn_export
from keras_attn.layers.attention.attention import Attention
from keras_attn.layers.attention.local_attention import (
    LocalAttention,
    check_position_gradient_scale,
)
from keras_attn.layers.attention.luong_attentional_state import LuongAttentionalState
from keras_attn.layers.mask_passthrough import FirstInputMaskPassthrough
from keras_attn.ops.masking import apply_query_mask, merge_masks

_RNNS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
# Decoder attention name -> LocalAttention mode (None: global attention).
ATTENTIONS = {"global": None, "local-m": "monotonic", "local-p": "predictive"}


@keras_attn_export("keras_attn.layers.LuongDecoder")
class LuongDecoder(FirstInputMaskPassthrough, keras.layers.Layer):
    """Recurrent decoder with Luong attention and input feeding (Luong et al., 2015).

    For every target step `t`, with encoder memory `h_s` `(batch, T_x, d_m)`:

        h_t   = f(h_{t-1}, [y_{t-1}; h~_{t-1}])   (batch, units)   f = LSTM or GRU cell, h~_0 = 0
        a_t   = align(h_t, h_s)                  (batch, T_x)     eq. 7 (global) or 9-10 (local)
        c_t   = sum_s a_t(s) h_s                 (batch, d_m)
        h~_t  = tanh(W_c [c_t; h_t])             (batch, units)   eq. 5
        p(y_t | y_<t, x) = softmax(W_s h~_t)                      eq. 6: the model's output layer

    `align` is `p(score(h_t, h_s))` with any score of `keras_attn.scores` ("dot", "general",
    "concat" in the paper) and any distribution. `attention="global"` attends to every source
    position; `"local-m"` to the window `|s - t| <= D`; `"local-p"` to `|s - p_t| <= D` around
    `p_t = S * sigmoid(v_p^T tanh(W_p h_t))` with the Gaussian factor
    `exp(-(s - p_t)^2 / (2 (D/2)^2))` (`keras_attn.layers.LocalAttention` computes the window).

    Unlike Bahdanau's decoder, attention comes *after* the recurrent step and reads `h_t`, not
    `h_{t-1}`; in the thesis' notation (eq. 2.18, whose `s^(t) = f(s^(t), ...)` is a typo for
    `s^(t-1)`) the cell input is `[y^(t-1); h~^(t-1)]` instead of `[y^(t-1); c^(t)]`.
    With `input_feeding=False` the cell input is `y_{t-1}` alone, so `h_1..h_{T_y}` do not depend
    on the attention: training then runs one teacher-forced `keras.layers.LSTM`/`GRU` pass
    (cuDNN-eligible on a GPU) and attends from all states at once. With input feeding it runs a
    `keras.ops.scan` over `step`. Either way inference calls `step` once per generated token.

    Args:
        units: decoder state size, also the size of `h~_t`.
        cell: `"lstm"` or `"gru"`.
        score: a name from `keras_attn.scores.SCORES` or a `keras_attn.scores.Score`; `"general"`
            (`h_t^T W_a h_s`) is Luong's best global model. `"dot"` needs `units == d_m`.
        distribution: a name from `keras_attn.distributions.DISTRIBUTIONS` or a `Distribution`.
        attention: `"global"`, `"local-m"` or `"local-p"`.
        window: `D`, the half width of a local window (the paper uses 10); ignored by global.
        input_feeding: feed `h~_{t-1}` to the cell with `y_{t-1}`.
        attention_units: hidden size of the `"concat"`/`"additive"` score network and of local-p's
            `W_p` (default: the memory size for the score, `units` for `W_p`).
        position_gradient_scale: local-p only: a factor on the gradients of `W_p` and `v_p`,
            their learning rate relative to the rest under plain SGD (see
            `keras_attn.layers.LocalAttention`). Ignored by global and local-m attention.

    Call arguments:
        inputs: embedded previous target tokens `(batch, T_y, d_y)`.
        memory: encoder outputs `(batch, T_x, d_m)`.
        memory_mask: bool `(batch, T_x)`; padded source positions get exactly zero weight and do
            not count in local-p's `S`. Filled from Keras masking when not given.
        initial_state: the cell's initial state, a list of `(batch, units)` tensors (`[h, c]` for
            an LSTM, `[h]` for a GRU); zeros when omitted.
        inputs_mask: bool `(batch, T_y)`; outputs at padded target steps are zeroed.
        return_attention_scores: also return the alignment history.
        training: passed to the cell.

    Returns:
        `h~` `(batch, T_y, units)`, or `(h~, alignments)` with alignments `(batch, T_y, T_x)`
        when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> decoder = LuongDecoder(8, attention="local-p", window=2)
    >>> y = np.zeros((2, 4, 3), "float32"); memory = np.ones((2, 6, 10), "float32")
    >>> outputs, alignments = decoder(y, memory, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(alignments.shape)
    ((2, 4, 8), (2, 4, 6))

    References:
        Luong, Pham and Manning, 2015, "Effective Approaches to Attention-based Neural Machine
        Translation", arXiv:1508.04025, sections 3.1-3.3.
    """

    def __init__(
        self,
        units: int,
        cell: str = "lstm",
        score="general",
        distribution="softmax",
        attention: str = "global",
        window: int = 10,
        input_feeding: bool = True,
        attention_units: int | None = None,
        position_gradient_scale: float = 1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
            raise ValueError(f"Expected units to be a positive integer. Received: units={units!r}")
        if cell not in _RNNS:
            raise ValueError(f"Expected cell in {sorted(_RNNS)}. Received: cell={cell!r}")
        if attention not in ATTENTIONS:
            raise ValueError(
                f"Expected attention in {list(ATTENTIONS)}. Received: attention={attention!r}"
            )
        if not isinstance(input_feeding, bool):
            raise ValueError(
                f"Expected input_feeding to be a bool. Received: input_feeding={input_feeding!r}"
            )
        check_position_gradient_scale(position_gradient_scale)
        self.units = units
        self.cell = cell
        self.score = score
        self.distribution = distribution
        self.attention = attention
        self.window = window
        self.input_feeding = input_feeding
        self.attention_units = attention_units
        self.position_gradient_scale = float(position_gradient_scale)
        self.num_cell_states = 2 if cell == "lstm" else 1
        score_kwargs = {"dtype": self.dtype_policy}
        if score in ("additive", "concat"):
            score_kwargs["units"] = attention_units
        score_fn = scores.get(score, **score_kwargs)
        distribution_fn = distributions.get(distribution, dtype=self.dtype_policy)
        mode = ATTENTIONS[attention]
        if mode is None:
            self.attention_layer = Attention(
                score=score_fn, distribution=distribution_fn, dtype=self.dtype_policy, name="align"
            )
        else:  # LocalAttention validates the window.
            self.attention_layer = LocalAttention(
                mode=mode,
                window=window,
                score=score_fn,
                distribution=distribution_fn,
                units=attention_units,
                position_gradient_scale=position_gradient_scale,
                dtype=self.dtype_policy,
                name="align",
            )
        self.supports_masking = True

    def build(self, inputs_shape, memory_shape):
        feed_size = self.units if self.input_feeding else 0
        self.rnn = _RNNS[self.cell](
            self.units,
            return_sequences=True,
            return_state=True,
            dtype=self.dtype_policy,
            name="rnn",
        )
        self.rnn.build((inputs_shape[0], None, inputs_shape[-1] + feed_size))
        self.attention_layer.build((inputs_shape[0], None, self.units), memory_shape)
        self.attentional_state = LuongAttentionalState(
            self.units, dtype=self.dtype_policy, name="attentional_state"
        )
        self.attentional_state.build(
            (inputs_shape[0], None, memory_shape[-1]), (inputs_shape[0], None, self.units)
        )
        self.built = True

    def initial_step_states(self, initial_state):
        """The states `step` carries, from the cell's initial state.

        `initial_state` (`[h, c]` or `[h]`) followed by `h~_0 = 0` `(batch, units)` with input
        feeding and the step index `t = 0` `(batch,)` int32 with local-m. Every entry is
        batch-major.
        """
        states = [ops.cast(state, self.compute_dtype) for state in initial_state]
        batch_size = ops.shape(states[0])[0]
        if self.input_feeding:
            states.append(ops.zeros((batch_size, self.units), dtype=self.compute_dtype))
        if self.attention == "local-m":
            states.append(ops.zeros((batch_size,), dtype="int32"))
        return states

    def get_initial_state(self, batch_size):
        """`initial_step_states` of a zero cell state: what `step` takes first."""
        zeros = [
            ops.zeros((batch_size, self.units), dtype=self.compute_dtype)
            for _ in range(self.num_cell_states)
        ]
        return self.initial_step_states(zeros)

    def prepare_memory(self, memory):
        """The key-only part of the score, computed once per source sentence."""
        return self.attention_layer.score_fn.prepare_keys(memory)

    def _attend(self, query, memory, prepared_memory, memory_mask, query_positions=None):
        """Context `(batch, T_q, d_m)` and weights `(batch, T_q, T_x)` for states `h_t`."""
        raw_scores = self.attention_layer.score_fn.score(query, prepared_memory)
        if self.attention == "global":
            mask = merge_masks(value_mask=memory_mask)
            weights = self.attention_layer.distribution_fn(raw_scores, attention_mask=mask)
        else:
            weights = self.attention_layer.window_weights(
                raw_scores, query, memory_mask, query_positions
            )
        # (batch, T_q, T_x) x (batch, T_x, d_m) -> (batch, T_q, d_m)
        context = ops.einsum("bqk,bkd->bqd", weights, ops.cast(memory, weights.dtype))
        return context, weights

    def step(self, inputs_t, states, memory, prepared_memory, memory_mask=None, training=None):
        """One decoder step.

        Args:
            inputs_t: embedded previous token `y_{t-1}` `(batch, d_y)`.
            states: the list `initial_step_states` describes, `h_{t-1}` first.
            memory: `(batch, T_x, d_m)`.
            prepared_memory: `prepare_memory(memory)`.
            memory_mask: bool `(batch, T_x)` or None.
            training: passed to the cell.

        Returns:
            `(h~_t (batch, units), alignment_t (batch, T_x), new_states)`.
        """
        cell_states = list(states[: self.num_cell_states])
        extra = list(states[self.num_cell_states :])
        if self.input_feeding:
            feed = extra.pop(0)  # h~_{t-1}
            cell_inputs = ops.concatenate([inputs_t, ops.cast(feed, inputs_t.dtype)], axis=-1)
        else:  # A new tensor: an embedding's Keras mask on `inputs_t` is not the cell's business.
            cell_inputs = ops.copy(inputs_t)
        positions = None
        if self.attention == "local-m":
            step_index = extra.pop(0)  # (batch,)
            positions = ops.expand_dims(ops.cast(step_index, "float32"), 1)  # p_t = t, (batch, 1)
        state_t, new_cell_states = self.rnn.cell(cell_inputs, cell_states, training=training)
        if not isinstance(new_cell_states, (list, tuple)):
            new_cell_states = [new_cell_states]
        query = ops.expand_dims(state_t, 1)  # h_t: (batch, 1, units)
        context, weights = self._attend(query, memory, prepared_memory, memory_mask, positions)
        attentional = self.attentional_state(ops.cast(context, query.dtype), query)[:, 0]
        new_states = list(new_cell_states)
        if self.input_feeding:
            new_states.append(attentional)
        if self.attention == "local-m":
            new_states.append(step_index + 1)
        return attentional, weights[:, 0, :], new_states

    def _scan(self, inputs, memory, memory_mask, initial_state, training):
        """The step loop over teacher-forced inputs: `h~` `(batch, T_y, units)`, alignments."""
        prepared_memory = self.prepare_memory(memory)
        batch_size = ops.shape(inputs)[0]
        initial_output = ops.zeros((batch_size, self.units), dtype=self.compute_dtype)
        initial_alignment = ops.zeros((batch_size, ops.shape(memory)[1]), dtype=self.compute_dtype)

        def body(carry, inputs_t):
            output, alignment, new_states = self.step(
                inputs_t, carry[0], memory, prepared_memory, memory_mask, training
            )
            new_carry = (new_states, output, ops.cast(alignment, self.compute_dtype))
            return new_carry, new_carry

        # keras.ops.scan stacks the carry, so it holds the step's output and alignment too.
        # Time-major: (T_y, batch, d_y) -> outputs (T_y, batch, units), alignments (T_y, batch, T_x)
        _, (_, outputs, alignments) = ops.scan(
            body,
            (self.initial_step_states(initial_state), initial_output, initial_alignment),
            ops.transpose(inputs, (1, 0, 2)),
        )
        return ops.transpose(outputs, (1, 0, 2)), ops.transpose(alignments, (1, 0, 2))

    def _teacher_forced(self, inputs, memory, memory_mask, initial_state, training):
        """Without input feeding: one RNN pass, then attention from every `h_t` at once."""
        # h_1..h_{T_y}: (batch, T_y, units); the final states are not needed.
        hidden, *_ = self.rnn(inputs, initial_state=initial_state, training=training)
        prepared_memory = self.prepare_memory(memory)
        context, weights = self._attend(hidden, memory, prepared_memory, memory_mask)
        outputs = self.attentional_state(ops.cast(context, hidden.dtype), hidden)
        return outputs, ops.cast(weights, self.compute_dtype)

    def call(
        self,
        inputs,
        memory,
        memory_mask=None,
        initial_state=None,
        inputs_mask=None,
        return_attention_scores=False,
        training=None,
    ):
        if initial_state is None:
            initial_state = [
                ops.zeros((ops.shape(inputs)[0], self.units), dtype=self.compute_dtype)
                for _ in range(self.num_cell_states)
            ]
        if len(initial_state) != self.num_cell_states:
            raise ValueError(
                f"A {self.cell} decoder takes {self.num_cell_states} initial state tensor(s). "
                f"Received: {len(initial_state)}"
            )
        initial_state = [ops.cast(state, self.compute_dtype) for state in initial_state]
        run = self._scan if self.input_feeding else self._teacher_forced
        outputs, alignments = run(inputs, memory, memory_mask, initial_state, training)
        outputs = apply_query_mask(outputs, inputs_mask)
        if return_attention_scores:
            return outputs, alignments
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units,
            cell=self.cell,
            score=scores.serialize(self.score),
            distribution=distributions.serialize(self.distribution),
            attention=self.attention,
            window=self.window,
            input_feeding=self.input_feeding,
            attention_units=self.attention_units,
            position_gradient_scale=self.position_gradient_scale,
        )
        return config
