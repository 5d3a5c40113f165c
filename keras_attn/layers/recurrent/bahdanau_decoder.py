"""Bahdanau's attention decoder: attention from the previous state, context fed to the cell."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.attention.attention import Attention
from keras_attn.layers.recurrent._gru_form import gru_form_kwargs
from keras_attn.layers.recurrent._recurrent_decoder import CELLS, AttentionDecoder


@keras_attn_export("keras_attn.layers.BahdanauDecoder")
class BahdanauDecoder(AttentionDecoder):
    """Recurrent decoder with Bahdanau attention (Bahdanau et al., 2015).

    For every target step `t`, with encoder memory `h^(1..T_x)` `(batch, T_x, d_m)`:

        alpha_t = p(a(h^(i), s^(t-1)))           (batch, T_x)     a = additive score
        c^(t)   = sum_i alpha_t,i h^(i)          (batch, d_m)
        s^(t)   = f(s^(t-1), [y^(t-1); c^(t)])   (batch, units)   f = LSTM or GRU cell
        o^(t)   = [s^(t); c^(t); y^(t-1)]        (batch, units + d_m + d_y)

    `o^(t)` holds every argument of the readout `g(y^(t-1), s^(t), c^(t))`; a Dense layer on it
    gives the logits. The attention reads the previous state `s^(t-1)` and its context enters
    the cell (section 3.1 and appendix A of the paper). The alignment `p(a(., s^(t-1)))` is an
    attention layer's: the one passed as `attention`, or an `Attention` built from `score`,
    `distribution` and `attention_units`.

    With `num_layers = L > 1`, `f` is a stack of `L` cells (see `RecurrentDecoder`): the
    attention reads the previous state of the top layer, `s^(t-1) = h_L^(t-1)`, the context
    enters the bottom layer with `y^(t-1)`, each layer above reads the one below (dropout
    between layers, residual connections from the third layer up, Wu et al., 2016), and
    `s^(t) = h_L^(t)` enters `o^(t)`.

    Training runs the loop over the teacher-forced inputs `y^(0..T_y-1)` (`call`); inference calls
    `step` once per generated token with the same weights, so both compute the same function.

    Args:
        units: decoder state size.
        cell: `"lstm"` or `"gru"`.
        score: alignment function name or `keras_attn.scores.Score`; `"additive"` is Bahdanau's.
            `"dot"` needs `units == d_m`.
        distribution: `"softmax"` or a `keras_attn.distributions.Distribution`.
        attention_units: hidden size of the additive/concat alignment network (default: `d_m`).
        attention: None, or the alignment as a `keras_attn.layers.Attention` layer (e.g.
            `Attention(score="additive")`; a `LocalAttention` with `mode="predictive"` too), its
            query `s^(t-1)`. `score`, `distribution` and `attention_units` are then not read. The
            layer's weights are saved under `attention`, while a decoder built from `score` keeps
            them under `score_fn` as it always has. The layer's dropout is not applied.
        reset_after: the GRU's form (`cell="gru"` only). True (the default, Keras' and cuDNN's):
            `h~ = tanh(x W_h + b_h + r ⊙ (s^(t-1) U_h + b'_h))`. False: Cho et al.'s equations,
            `h~ = tanh(x W_h + (r ⊙ s^(t-1)) U_h + b_h)`. This decoder steps its cell one target
            position at a time (the attention reads every `s^(t-1)`), so neither form runs the
            fused cuDNN kernel here. False with an LSTM is a `ValueError`.
        num_layers: the number of stacked recurrent layers (default 1). Layer 1's cell is saved
            under `cell`, layer `l > 1` under `rnn_<l>`.
        layer_dropout: dropout rate on the output of each layer passed to the next one.

    Call arguments:
        inputs: embedded previous target tokens `(batch, T_y, d_y)`.
        memory: encoder outputs `(batch, T_x, d_m)`.
        memory_mask: bool `(batch, T_x)`; padded source positions get exactly zero weight.
            Filled from Keras masking when not given.
        initial_state: list of `(batch, units)` tensors (`[h, c]` per LSTM layer, `[h]` per GRU
            layer, bottom layer first); zeros when omitted.
        inputs_mask: bool `(batch, T_y)`; outputs at padded target steps are zeroed.
        return_attention_scores: also return the alignments.
        training: passed to the cells and the dropout between layers.

    Returns:
        `outputs` `(batch, T_y, units + d_m + d_y)`, or `(outputs, alignments)` with alignments
        `(batch, T_y, T_x)` when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> decoder = BahdanauDecoder(8)
    >>> y = np.zeros((2, 4, 3), "float32"); memory = np.ones((2, 6, 10), "float32")
    >>> outputs, alignments = decoder(y, memory, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(alignments.shape)
    ((2, 4, 21), (2, 4, 6))
    >>> from keras_attn.layers import Attention
    >>> decoder = BahdanauDecoder(8, attention=Attention(score="concat", distribution="sparsemax"))
    >>> tuple(decoder(y, memory).shape)
    (2, 4, 21)
    >>> deep = BahdanauDecoder(8, num_layers=3, layer_dropout=0.2)
    >>> tuple(deep(y, memory).shape), deep.num_states  # [h_1, c_1, h_2, c_2, h_3, c_3]
    ((2, 4, 21), 6)

    References:
        Bahdanau, Cho and Bengio, 2015, "Neural Machine Translation by Jointly Learning to Align
        and Translate", arXiv:1409.0473. Wu et al., 2016, "Google's Neural Machine Translation
        System", arXiv:1609.08144 (stacked decoders with residual connections).
    """

    def __init__(
        self,
        units: int,
        cell: str = "lstm",
        score="additive",
        distribution="softmax",
        attention_units: int | None = None,
        attention: Attention | None = None,
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
        if attention is not None and (
            not isinstance(attention, Attention) or attention.uses_query_positions
        ):
            raise ValueError(
                "Expected attention to be None or an Attention layer that needs no query "
                f"positions. Received: attention={attention!r}"
            )
        self.score = score
        self.distribution = distribution
        self.attention_units = attention_units
        self.attention = attention
        self.num_states = self.num_initial_states
        if attention is None:
            # The attributes (and so the checkpoint and .keras layout) of a decoder built from
            # names: score_fn and distribution_fn, the attention layer only wraps them.
            self.score_fn, self.distribution_fn = self.score_and_distribution(
                score, distribution, attention_units
            )
            attention = Attention(
                score=self.score_fn,
                distribution=self.distribution_fn,
                dtype=self.dtype_policy,
                name="attention",
            )
        # Private, so that Keras saves the weights under `score_fn` or `attention` first.
        self._attention_layer = attention
        self.rnn_cell = CELLS[cell](
            units, **gru_form_kwargs(cell, self.reset_after), dtype=self.dtype_policy, name="cell"
        )

    def build(self, inputs_shape, memory_shape):
        query_shape = (inputs_shape[0], 1, self.units)  # s^(t-1)
        if self.attention is None:  # Weight paths `<decoder>/<score>/...`, as they always were.
            self.score_fn.build(query_shape, memory_shape)
        if not self._attention_layer.built:  # A layer passed in or deserialized may be built.
            self._attention_layer.build(query_shape, memory_shape)
        self.rnn_cell.build((inputs_shape[0], inputs_shape[-1] + memory_shape[-1]))
        self.build_upper_layers(inputs_shape[0])
        self.built = True

    def output_size(self, inputs_size: int, memory_size: int) -> int:
        """`units + d_m + d_y`: `o^(t) = [s^(t); c^(t); y^(t-1)]`."""
        return self.units + memory_size + inputs_size

    def prepare_memory(self, memory):
        """The key-only part of the score, computed once per source sentence."""
        return self._attention_layer.prepare_keys(memory)

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
            inputs_t: embedded previous token `y^(t-1)` `(batch, d_y)`.
            states: the stack's states, `num_states` tensors `(batch, units)`, bottom layer
                first.
            memory: `(batch, T_x, d_m)`.
            prepared_memory: `prepare_memory(memory)`.
            memory_mask: bool `(batch, T_x)` or None.
            training: passed to the cells and the dropout between layers.
            dropout_masks: this step's masks of the dropout between layers (see
                `RecurrentDecoder.layer_dropout_masks`), or None to draw them.

        Returns:
            `(output_t (batch, units + d_m + d_y), alignment_t (batch, T_x), new_states)`.
        """
        query = ops.expand_dims(self.top_state(states), 1)  # s^(t-1) = h_L^(t-1): (batch, 1, units)
        # (batch, 1, T_x)
        weights = self._attention_layer.attention_weights(query, prepared_memory, memory_mask)
        # (batch, 1, T_x) x (batch, T_x, d_m) -> (batch, d_m)
        context = ops.einsum("bqk,bkd->bd", weights, ops.cast(memory, weights.dtype))
        cell_inputs = ops.concatenate([inputs_t, ops.cast(context, inputs_t.dtype)], axis=-1)
        state_t, new_states = self.step_stack(
            self.rnn_cell, cell_inputs, states, training, dropout_masks
        )
        output = ops.concatenate([state_t, ops.cast(context, state_t.dtype), inputs_t], axis=-1)
        return output, weights[:, 0, :], new_states

    def get_config(self):
        config = super().get_config()
        config.update(serialize_arguments(self, "score", "distribution", "attention_units"))
        if self.attention is not None:  # A config without the key loads as a decoder by name.
            config["attention"] = keras.saving.serialize_keras_object(self.attention)
        return config
