"""Recurrent decoder without attention: the source reaches it only as one fixed vector."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.recurrent._recurrent_decoder import RecurrentDecoder
from keras_attn.ops.masking import apply_query_mask


@keras_attn_export("keras_attn.layers.PlainDecoder")
class PlainDecoder(RecurrentDecoder):
    """The encoder-decoder's decoder of Sutskever et al. and Cho et al.: no attention.

    The source sentence reaches the decoder only through the initial state `s^(0)` and a fixed
    context vector `c` `(batch, d_c)` (the encoder's summary), never position by position:

        context_feeding=True (Cho et al., 2014, eq. 7 and appendix A.1):
            s^(t) = f(s^(t-1), [y^(t-1); c])     (batch, units)
            o^(t) = [s^(t); c; y^(t-1)]          (batch, units + d_c + d_y)
        context_feeding=False (Sutskever et al., 2014):
            s^(t) = f(s^(t-1), y^(t-1))          (batch, units)
            o^(t) = s^(t)

    `f` is an LSTM or GRU cell; `o^(t)` holds every argument of the readout `g(s^(t), y^(t-1), c)`,
    and a Dense layer on it gives the logits. Since `c` does not depend on the decoder, training
    runs one teacher-forced `keras.layers.LSTM`/`GRU` pass over `[y^(t-1); c]` (cuDNN-eligible on
    a GPU); inference calls `step` once per generated token with the same cell, so both compute
    the same function. It is the attention decoder's recurrence `s^(t) = f(s^(t-1), y^(t-1), c)`
    with one `c` for every `t` instead of a context `c^(t)` per step.

    With `num_layers = L > 1`, `f` is a stack of `L` cells (Sutskever et al. use 4 LSTM
    layers): `c` enters the bottom layer with `y^(t-1)`, each layer above reads the one below
    (dropout between layers, residual connections from the third layer up, Wu et al., 2016;
    see `RecurrentDecoder`), and `s^(t) = h_L^(t)`, the top layer's output, enters `o^(t)`.

    Args:
        units: decoder state size.
        cell: `"lstm"` or `"gru"`.
        context_feeding: feed `c` to the cell and to the readout at every step (Cho et al.);
            without it (Sutskever et al.) the source enters only through the initial state.
        reset_after: the GRU's form (`cell="gru"` only). True (the default, Keras' and cuDNN's):
            `h~ = tanh(x W_h + b_h + r ⊙ (s^(t-1) U_h + b'_h))`; the teacher-forced pass then runs
            the fused cuDNN kernel on a GPU. False: Cho et al.'s equations (section 2.3),
            `h~ = tanh(x W_h + (r ⊙ s^(t-1)) U_h + b_h)`, which have no cuDNN kernel. False with an
            LSTM is a `ValueError`.
        num_layers: the number of stacked recurrent layers (default 1). Layer 1 is saved under
            `rnn`, layer `l > 1` under `rnn_<l>`.
        layer_dropout: dropout rate on the output of each layer passed to the next one.

    Call arguments:
        inputs: embedded previous target tokens `(batch, T_y, d_y)`.
        context: the source summary `c` `(batch, d_c)`; not read when `context_feeding=False`.
        initial_state: list of `(batch, units)` tensors (`[h, c]` per LSTM layer, `[h]` per GRU
            layer, bottom layer first); zeros when omitted.
        inputs_mask: bool `(batch, T_y)`; outputs at padded target steps are zeroed.
        training: passed to the cells and the dropout between layers.

    Returns:
        `outputs` `(batch, T_y, units + d_c + d_y)` with context feeding, `(batch, T_y, units)`
        without.

    Example:

    >>> import numpy as np
    >>> decoder = PlainDecoder(8)
    >>> y = np.zeros((2, 4, 3), "float32"); c = np.ones((2, 10), "float32")
    >>> tuple(decoder(y, c).shape), tuple(PlainDecoder(8, context_feeding=False)(y, c).shape)
    ((2, 4, 21), (2, 4, 8))
    >>> deep = PlainDecoder(8, num_layers=4, layer_dropout=0.2)
    >>> tuple(deep(y, c).shape), deep.num_states  # [h_1, c_1, ..., h_4, c_4]
    ((2, 4, 21), 8)

    References:
        Sutskever, Vinyals and Le, 2014, "Sequence to Sequence Learning with Neural Networks",
        arXiv:1409.3215. Cho et al., 2014, "Learning Phrase Representations using RNN
        Encoder-Decoder for Statistical Machine Translation", arXiv:1406.1078. Wu et al., 2016,
        "Google's Neural Machine Translation System", arXiv:1609.08144 (residual connections).
    """

    def __init__(
        self,
        units: int,
        cell: str = "lstm",
        context_feeding: bool = True,
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
        if not isinstance(context_feeding, bool):
            raise ValueError(
                "Expected context_feeding to be a bool. "
                f"Received: context_feeding={context_feeding!r}"
            )
        self.context_feeding = context_feeding
        self.num_states = self.num_initial_states

    def build(self, inputs_shape, context_shape):
        feed_size = context_shape[-1] if self.context_feeding else 0
        self.rnn = self.build_rnn(inputs_shape[0], inputs_shape[-1] + feed_size)
        self.build_upper_layers(inputs_shape[0])
        self.built = True

    def step(self, inputs_t, states, context, training=None):
        """One decoder step.

        Args:
            inputs_t: embedded previous token `y^(t-1)` `(batch, d_y)`.
            states: the stack's states, `num_states` tensors `(batch, units)`, bottom layer
                first.
            context: `c` `(batch, d_c)`.
            training: passed to the cells and the dropout between layers.

        Returns:
            `(output_t, new_states)`: `o^(t)` as in the class docstring and the cell's states.
        """
        if self.context_feeding:
            context = ops.cast(context, inputs_t.dtype)
            cell_inputs = ops.concatenate([inputs_t, context], axis=-1)
        else:  # A new tensor: an embedding's Keras mask on `inputs_t` is not the cell's business.
            cell_inputs = ops.copy(inputs_t)
        state_t, new_states = self.step_stack(self.rnn.cell, cell_inputs, states, training)
        if self.context_feeding:
            state_t = ops.concatenate([state_t, ops.cast(context, state_t.dtype), inputs_t], -1)
        return state_t, new_states

    def call(self, inputs, context, initial_state=None, inputs_mask=None, training=None):
        initial_state = self.check_initial_state(initial_state, ops.shape(inputs)[0])
        if self.context_feeding:
            context = ops.cast(context, inputs.dtype)
            # c at every step: (batch, d_c) -> (batch, T_y, d_c)
            repeated = ops.repeat(ops.expand_dims(context, 1), ops.shape(inputs)[1], axis=1)
            cell_inputs = ops.concatenate([inputs, repeated], axis=-1)
        else:
            cell_inputs = ops.copy(inputs)
        # s^(1..T_y), the top layer's outputs: (batch, T_y, units)
        outputs = self.run_stack(self.rnn, cell_inputs, initial_state, training)
        if self.context_feeding:
            outputs = ops.concatenate([outputs, ops.cast(repeated, outputs.dtype), inputs], -1)
        return apply_query_mask(outputs, inputs_mask)

    def compute_output_shape(self, inputs_shape, context_shape):
        size = self.units
        if self.context_feeding:
            size += context_shape[-1] + inputs_shape[-1]
        return (inputs_shape[0], inputs_shape[1], size)

    def get_config(self):
        config = super().get_config()
        config.update(context_feeding=self.context_feeding)
        return config
