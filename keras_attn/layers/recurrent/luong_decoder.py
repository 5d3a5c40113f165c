"""Luong's attention decoder: attention from the current state, attentional state fed back."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.attention.attention import Attention
from keras_attn.layers.attention.local_attention import (
    LocalAttention,
    check_position_gradient_scale,
)
from keras_attn.layers.attention.luong_attentional_state import LuongAttentionalState
from keras_attn.layers.recurrent._recurrent_decoder import AttentionDecoder

# Decoder attention name -> LocalAttention mode (None: global attention).
ATTENTIONS = {"global": None, "local-m": "monotonic", "local-p": "predictive"}


@keras_attn_export("keras_attn.layers.LuongDecoder")
class LuongDecoder(AttentionDecoder):
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
    `h_{t-1}`, and the cell input is `[y_{t-1}; h~_{t-1}]` instead of `[y_{t-1}; c_t]`.
    With `input_feeding=False` the cell input is `y_{t-1}` alone, so `h_1..h_{T_y}` do not depend
    on the attention: training then runs one teacher-forced `keras.layers.LSTM`/`GRU` pass
    (cuDNN-eligible on a GPU) and attends from all states at once. With input feeding it runs a
    `keras.ops.scan` over `step`. Either way inference calls `step` once per generated token.

    With `num_layers = L > 1`, `f` is a stack of `L` cells, as in the paper's 4-layer models
    (section 4.1): input feeding enters the bottom layer, `[y_{t-1}; h~_{t-1}]`, each layer
    above reads the one below (dropout between layers, residual connections from the third
    layer up as in Wu et al., 2016; see `RecurrentDecoder`), and the attention and `h~_t` read
    the top layer's `h_t = h_L,t` (the paper's Figure 1 and section 3).

    Args:
        units: decoder state size, also the size of `h~_t`.
        cell: `"lstm"` or `"gru"`.
        score: a name from `keras_attn.scores.SCORES` or a `keras_attn.scores.Score`; `"general"`
            (`h_t^T W_a h_s`) is Luong's best global model. `"dot"` needs `units == d_m`.
        distribution: a name from `keras_attn.distributions.DISTRIBUTIONS` or a `Distribution`.
        attention: the alignment, a `keras_attn.layers.Attention` (global) or
            `keras_attn.layers.LocalAttention` layer; the names `"global"`, `"local-m"` and
            `"local-p"` build one from `score`, `distribution`, `window`, `attention_units` and
            `position_gradient_scale`, which a layer passed here does not read.
        window: `D`, the half width of a local window (the paper uses 10); ignored by global.
        input_feeding: feed `h~_{t-1}` to the cell with `y_{t-1}`.
        attention_units: hidden size of the `"concat"`/`"additive"` score network and of local-p's
            `W_p` (default: the memory size for the score, `units` for `W_p`).
        position_gradient_scale: local-p only: a factor on the gradients of `W_p` and `v_p`,
            their learning rate relative to the rest under plain SGD (see
            `keras_attn.layers.LocalAttention`). Ignored by global and local-m attention.
        reset_after: the GRU's form (`cell="gru"` only). True (the default, Keras' and cuDNN's):
            `h~ = tanh(x W_h + b_h + r ⊙ (h_{t-1} U_h + b'_h))`; the teacher-forced pass without
            input feeding then runs the fused cuDNN kernel on a GPU. False: Cho et al.'s
            equations, `h~ = tanh(x W_h + (r ⊙ h_{t-1}) U_h + b_h)`, which have no cuDNN kernel.
            False with an LSTM is a `ValueError`.
        num_layers: the number of stacked recurrent layers (default 1). Layer 1 is saved under
            `rnn`, layer `l > 1` under `rnn_<l>`.
        layer_dropout: dropout rate on the output of each layer passed to the next one.

    Call arguments:
        inputs: embedded previous target tokens `(batch, T_y, d_y)`.
        memory: encoder outputs `(batch, T_x, d_m)`.
        memory_mask: bool `(batch, T_x)`; padded source positions get exactly zero weight and do
            not count in local-p's `S`. Filled from Keras masking when not given.
        initial_state: the stack's initial state, a list of `(batch, units)` tensors (`[h, c]`
            per LSTM layer, `[h]` per GRU layer, bottom layer first); zeros when omitted.
        inputs_mask: bool `(batch, T_y)`; outputs at padded target steps are zeroed.
        return_attention_scores: also return the alignment history.
        training: passed to the cells and the dropout between layers.

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
    >>> deep = LuongDecoder(8, num_layers=4, layer_dropout=0.2)  # Luong et al.'s depth
    >>> tuple(deep(y, memory).shape), deep.num_initial_states  # [h_1, c_1, ..., h_4, c_4]
    ((2, 4, 8), 8)

    References:
        Luong, Pham and Manning, 2015, "Effective Approaches to Attention-based Neural Machine
        Translation", arXiv:1508.04025, sections 3.1-3.3 and 4.1. Wu et al., 2016, "Google's
        Neural Machine Translation System", arXiv:1609.08144 (residual connections).
    """

    def __init__(
        self,
        units: int,
        cell: str = "lstm",
        score="general",
        distribution="softmax",
        attention: str | Attention = "global",
        window: int = 10,
        input_feeding: bool = True,
        attention_units: int | None = None,
        position_gradient_scale: float = 1.0,
        reset_after: bool = True,
        num_layers: int = 1,
        layer_dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__(
            units,
            cell,
            reset_after=reset_after,
            num_layers=num_layers,
            layer_dropout=layer_dropout,
            **kwargs,
        )
        if isinstance(attention, dict):
            attention = keras.saving.deserialize_keras_object(attention)
        if not isinstance(attention, (Attention, LocalAttention)) and attention not in ATTENTIONS:
            raise ValueError(
                f"Expected attention in {list(ATTENTIONS)} or an Attention or LocalAttention "
                f"layer. Received: attention={attention!r}"
            )
        if not isinstance(input_feeding, bool):
            raise ValueError(
                f"Expected input_feeding to be a bool. Received: input_feeding={input_feeding!r}"
            )
        check_position_gradient_scale(position_gradient_scale)
        self.score = score
        self.distribution = distribution
        self.attention = attention
        self.window = window
        self.input_feeding = input_feeding
        self.attention_units = attention_units
        self.position_gradient_scale = float(position_gradient_scale)
        if isinstance(attention, str):
            attention = self._attention_from_name(attention)
        self.attention_layer = attention
        # local-m aligns step t with source position p_t = t: the decoder counts its steps.
        self.counts_steps = attention.uses_query_positions

    def _attention_from_name(self, name: str) -> Attention | LocalAttention:
        """The attention layer that `"global"`, `"local-m"` or `"local-p"` stands for."""
        score_fn, distribution_fn = self.score_and_distribution(
            self.score, self.distribution, self.attention_units
        )
        mode = ATTENTIONS[name]
        if mode is None:
            return Attention(
                score=score_fn, distribution=distribution_fn, dtype=self.dtype_policy, name="align"
            )
        return LocalAttention(  # LocalAttention validates the window.
            mode=mode,
            window=self.window,
            score=score_fn,
            distribution=distribution_fn,
            units=self.attention_units,
            position_gradient_scale=self.position_gradient_scale,
            dtype=self.dtype_policy,
            name="align",
        )

    def build(self, inputs_shape, memory_shape):
        feed_size = self.units if self.input_feeding else 0
        self.rnn = self.build_rnn(inputs_shape[0], inputs_shape[-1] + feed_size)
        self.build_upper_layers(inputs_shape[0])
        if not self.attention_layer.built:  # A layer passed in or deserialized may be built.
            self.attention_layer.build((inputs_shape[0], None, self.units), memory_shape)
        self.attentional_state = LuongAttentionalState(
            self.units, dtype=self.dtype_policy, name="attentional_state"
        )
        self.attentional_state.build(
            (inputs_shape[0], None, memory_shape[-1]), (inputs_shape[0], None, self.units)
        )
        self.built = True

    def initial_step_states(self, initial_state):
        """The states `step` carries, from the stack's initial state.

        `initial_state` (`[h, c]` or `[h]` per layer, bottom layer first) followed by
        `h~_0 = 0` `(batch, units)` with input feeding and the step index `t = 0` `(batch,)`
        int32 with local-m. Every entry is batch-major.
        """
        states = super().initial_step_states(initial_state)
        batch_size = ops.shape(states[0])[0]
        if self.input_feeding:
            states.append(ops.zeros((batch_size, self.units), dtype=self.compute_dtype))
        if self.counts_steps:
            states.append(ops.zeros((batch_size,), dtype="int32"))
        return states

    def output_size(self, inputs_size: int, memory_size: int) -> int:
        """`units`, the size of `h~_t`."""
        return self.units

    def prepare_memory(self, memory):
        """The key-only part of the score, computed once per source sentence."""
        return self.attention_layer.prepare_keys(memory)

    def _attend(self, query, memory, prepared_memory, memory_mask, query_positions=None):
        """Context `(batch, T_q, d_m)` and weights `(batch, T_q, T_x)` for states `h_t`."""
        options = {} if query_positions is None else {"query_positions": query_positions}
        weights = self.attention_layer.attention_weights(
            query, prepared_memory, memory_mask, **options
        )
        # (batch, T_q, T_x) x (batch, T_x, d_m) -> (batch, T_q, d_m)
        context = ops.einsum("bqk,bkd->bqd", weights, ops.cast(memory, weights.dtype))
        return context, weights

    def step(
        self,
        inputs_t,
        states,
        memory,
        prepared_memory,
        memory_mask=None,
        training=None,
        dropout_masks=None,
    ):
        """One decoder step.

        Args:
            inputs_t: embedded previous token `y_{t-1}` `(batch, d_y)`.
            states: the list `initial_step_states` describes, the stack's states first.
            memory: `(batch, T_x, d_m)`.
            prepared_memory: `prepare_memory(memory)`.
            memory_mask: bool `(batch, T_x)` or None.
            training: passed to the cells and the dropout between layers.
            dropout_masks: this step's masks of the dropout between layers (see
                `RecurrentDecoder.layer_dropout_masks`), or None to draw them.

        Returns:
            `(h~_t (batch, units), alignment_t (batch, T_x), new_states)`.
        """
        cell_states = list(states[: self.num_initial_states])
        extra = list(states[self.num_initial_states :])
        if self.input_feeding:
            feed = extra.pop(0)  # h~_{t-1}
            cell_inputs = ops.concatenate([inputs_t, ops.cast(feed, inputs_t.dtype)], axis=-1)
        else:  # A new tensor: an embedding's Keras mask on `inputs_t` is not the cell's business.
            cell_inputs = ops.copy(inputs_t)
        positions = None
        if self.counts_steps:
            step_index = extra.pop(0)  # (batch,)
            positions = ops.expand_dims(ops.cast(step_index, "float32"), 1)  # p_t = t, (batch, 1)
        state_t, new_states = self.step_stack(
            self.rnn.cell, cell_inputs, cell_states, training, dropout_masks
        )
        query = ops.expand_dims(state_t, 1)  # h_t of the top layer: (batch, 1, units)
        context, weights = self._attend(query, memory, prepared_memory, memory_mask, positions)
        attentional = self.attentional_state(ops.cast(context, query.dtype), query)[:, 0]
        if self.input_feeding:
            new_states.append(attentional)
        if self.counts_steps:
            new_states.append(step_index + 1)
        return attentional, weights[:, 0, :], new_states

    def decode(self, inputs, memory, memory_mask, initial_state, training=None):
        """`h~` `(batch, T_y, units)` and the alignments `(batch, T_y, T_x)`.

        With input feeding, `step` over every target position. Without it, one RNN pass per
        layer gives the top layer's `h_1..h_{T_y}` and the attention reads them all at once.
        """
        if self.input_feeding:
            return self.run_steps(inputs, memory, memory_mask, initial_state, training)
        # h_1..h_{T_y} of the top layer: (batch, T_y, units)
        hidden = self.run_stack(self.rnn, inputs, initial_state, training)
        prepared_memory = self.prepare_memory(memory)
        context, weights = self._attend(hidden, memory, prepared_memory, memory_mask)
        outputs = self.attentional_state(ops.cast(context, hidden.dtype), hidden)
        return outputs, ops.cast(weights, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self,
                "score",
                "distribution",
                "attention",
                "window",
                "input_feeding",
                "attention_units",
                "position_gradient_scale",
            )
        )
        return config
