"""Bidirectional recurrent encoder returning the sequence and decoder-ready final states."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import check_choice, serialize_arguments
from keras_attn.layers.recurrent._bidirectional import bidirectional
from keras_attn.layers.recurrent._gru_form import check_gru_form, gru_form_kwargs
from keras_attn.layers.recurrent._recurrent_decoder import check_layer_dropout, check_num_layers

_CELLS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
_MERGE_MODES = ("concat", "sum", "mul", "ave")


@keras_attn_export("keras_attn.layers.BidirectionalEncoder")
class BidirectionalEncoder(keras.layers.Layer):
    """Bidirectional LSTM/GRU encoder (Schuster and Paliwal, 1997; Bahdanau et al., 2015).

    `h^(t) = [h_fwd^(t); h_bwd^(t)]` for `merge_mode="concat"`, where the forward RNN reads
    `x^(1..T)` and the backward one `x^(T..1)`. The final states of both directions are
    concatenated, `[h_fwd^(T); h_bwd^(1)]` (and likewise the LSTM cell state), ready to initialise
    a decoder (`C = q(h^(1), …, h^(T))`).

    With `num_layers = L > 1` the bidirectional layers are stacked: layer `l > 1` reads the
    merged sequence of layer `l - 1` (dropout `layer_dropout` between them), and from the third
    layer up it adds its input to its output (residual connections, Wu et al., 2016, section
    3.1): `h_l = BiRNN_l(dropout(h_{l-1})) + h_{l-1}` for `l >= 3`. The sequence returned is the
    top layer's; the final states of every layer come back, bottom layer first, ready to
    initialise a decoder of the same depth.

    Shapes: inputs `(batch, T, d)` → sequence `(batch, T, 2 * units)` for `"concat"`,
    `(batch, T, units)` otherwise; each final state `(batch, 2 * units)`.

    Args:
        units: size of each direction's state.
        cell: `"lstm"` or `"gru"`.
        merge_mode: how the two directions' sequences are merged: `"concat"`, `"sum"`, `"mul"`
            or `"ave"`.
        dropout: dropout on the inputs of each direction.
        use_cudnn: passed to the Keras RNNs (`"auto"`, True or False); exporting sets False so
            no Cudnn op reaches a SavedModel.
        reset_after: the GRU's form (`cell="gru"` only). True (the default, Keras' and cuDNN's):
            `h~ = tanh(x W_h + b_h + r ⊙ (h^(t-1) U_h + b'_h))`, the fused cuDNN kernel on a GPU.
            False: Cho et al.'s equations, `h~ = tanh(x W_h + (r ⊙ h^(t-1)) U_h + b_h)`, which
            have no cuDNN kernel (the generic loop on every device). False with an LSTM or with
            `use_cudnn=True` is a `ValueError`.
        num_layers: the number of stacked bidirectional layers (default 1). Layer 1 is saved
            under `bidirectional`, layer `l > 1` under `bidirectional_<l>`.
        layer_dropout: dropout rate on the sequence passed from one layer to the next.

    Call arguments:
        inputs: `(batch, T, d)`.
        mask: bool `(batch, T)`, filled from Keras masking (e.g. `Embedding(mask_zero=True)`);
            padded steps are skipped, so outputs do not depend on padding values.
        training: enables dropout.

    Returns:
        A flat tuple, as Keras RNNs with `return_state=True`: `(sequence, h, c)` for an LSTM,
        `(sequence, h)` for a GRU; with `num_layers > 1`, `(sequence, h_1, c_1, ..., h_L, c_L)`
        (`num_states` final states in all, `states_per_layer` per layer).

    Example:

    >>> import numpy as np
    >>> encoder = BidirectionalEncoder(8)
    >>> sequence, *states = encoder(np.zeros((2, 5, 3), "float32"))
    >>> tuple(sequence.shape), [tuple(s.shape) for s in states]
    ((2, 5, 16), [(2, 16), (2, 16)])
    >>> deep = BidirectionalEncoder(8, cell="gru", num_layers=3, layer_dropout=0.1)
    >>> sequence, *states = deep(np.zeros((2, 5, 3), "float32"))
    >>> tuple(sequence.shape), [tuple(s.shape) for s in states]
    ((2, 5, 16), [(2, 16), (2, 16), (2, 16)])

    References:
        Schuster and Paliwal, 1997, "Bidirectional recurrent neural networks"; Bahdanau, Cho and
        Bengio, 2015, arXiv:1409.0473, section 3.2; Wu et al., 2016, "Google's Neural Machine
        Translation System", arXiv:1609.08144 (stacked layers, residual connections).
    """

    def __init__(
        self,
        units: int,
        cell: str = "lstm",
        merge_mode: str = "concat",
        dropout: float = 0.0,
        use_cudnn="auto",
        reset_after: bool = True,
        num_layers: int = 1,
        layer_dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(f"Expected units to be a positive integer. Received: units={units!r}")
        if cell not in _CELLS:
            raise ValueError(f"Expected cell in {sorted(_CELLS)}. Received: cell={cell!r}")
        self.units = units
        self.cell = cell
        self.merge_mode = check_choice("merge_mode", merge_mode, _MERGE_MODES)
        self.dropout = float(dropout)
        self.use_cudnn = use_cudnn
        self.reset_after = check_gru_form(cell, reset_after, use_cudnn)
        self.num_layers = check_num_layers(num_layers)
        self.layer_dropout = check_layer_dropout(layer_dropout)
        self.states_per_layer = 2 if cell == "lstm" else 1
        self.num_states = self.states_per_layer * self.num_layers
        self.rnn = self._make_layer("bidirectional")
        if self.num_layers > 1:
            self.upper_rnns = [
                self._make_layer(f"bidirectional_{layer}")
                for layer in range(2, self.num_layers + 1)
            ]
            self.layer_dropouts = [
                keras.layers.Dropout(
                    self.layer_dropout, dtype=self.dtype_policy, name=f"dropout_{layer}"
                )
                for layer in range(2, self.num_layers + 1)
            ]
        self.supports_masking = True

    def _make_layer(self, name: str) -> keras.layers.Bidirectional:
        """One bidirectional layer of the stack, returning its sequence and final states."""
        return bidirectional(
            _CELLS[self.cell](
                self.units,
                return_sequences=True,
                return_state=True,
                dropout=self.dropout,
                use_cudnn=self.use_cudnn,
                **gru_form_kwargs(self.cell, self.reset_after),
                dtype=self.dtype_policy,
            ),
            merge_mode=self.merge_mode,
            name=name,
            dtype=self.dtype_policy,
        )

    def _stack(self) -> list:
        """The bidirectional layers, bottom first."""
        return [self.rnn, *(self.upper_rnns if self.num_layers > 1 else [])]

    def set_use_cudnn(self, use_cudnn) -> None:
        """Switch both directions' Cudnn kernels on/off (False before tracing an export)."""
        self.use_cudnn = use_cudnn
        for rnn in self._stack():
            for layer in (rnn.forward_layer, rnn.backward_layer):
                layer.use_cudnn = use_cudnn

    def build(self, inputs_shape):
        self.rnn.build(inputs_shape)
        if self.num_layers > 1:
            # Every layer above the first reads the merged sequence (batch, T, width).
            sequence_shape = tuple(self.rnn.compute_output_shape(inputs_shape)[0])
            for rnn, dropout in zip(self.upper_rnns, self.layer_dropouts, strict=True):
                dropout.build(sequence_shape)
                rnn.build(sequence_shape)
        self.built = True

    def _merged_states(self, outputs) -> list:
        """`[h_fwd^(T); h_bwd^(1)]` (and the cell states likewise) of one layer's outputs."""
        forward_states = outputs[1 : 1 + self.states_per_layer]
        backward_states = outputs[1 + self.states_per_layer :]
        return [
            ops.concatenate([forward, backward], axis=-1)
            for forward, backward in zip(forward_states, backward_states, strict=True)
        ]

    def call(self, inputs, mask=None, training=None):
        outputs = self.rnn(inputs, mask=mask, training=training)
        sequence = outputs[0]
        states = self._merged_states(outputs)
        for index in range(1, self.num_layers):
            layer_inputs = self.layer_dropouts[index - 1](sequence, training=training)
            outputs = self.upper_rnns[index - 1](layer_inputs, mask=mask, training=training)
            # Layers 3..L add their input to their output (Wu et al., 2016).
            sequence = outputs[0] + sequence if index >= 2 else outputs[0]
            states.extend(self._merged_states(outputs))
        return (sequence, *states)

    def compute_mask(self, inputs, mask=None):
        return (mask,) + (None,) * self.num_states

    def compute_output_shape(self, inputs_shape):
        batch, steps = inputs_shape[0], inputs_shape[1]
        sequence_size = 2 * self.units if self.merge_mode == "concat" else self.units
        state_shape = (batch, 2 * self.units)
        return ((batch, steps, sequence_size),) + (state_shape,) * self.num_states

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self, "units", "cell", "merge_mode", "dropout", "use_cudnn", "reset_after"
            )
        )
        # A one-layer encoder keeps the config it has always had; configs without these keys
        # load as one layer.
        if self.num_layers != 1:
            config["num_layers"] = self.num_layers
        if self.layer_dropout:
            config["layer_dropout"] = self.layer_dropout
        return config
