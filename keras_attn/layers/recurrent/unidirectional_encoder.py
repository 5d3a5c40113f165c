"""Unidirectional recurrent encoder, optionally over the reversed source."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.recurrent._gru_form import check_gru_form, gru_form_kwargs
from keras_attn.layers.recurrent._recurrent_decoder import check_layer_dropout, check_num_layers

_CELLS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}


@keras_attn_export("keras_attn.layers.UnidirectionalEncoder")
class UnidirectionalEncoder(keras.layers.Layer):
    """Unidirectional LSTM/GRU encoder (Sutskever et al., 2014; Luong et al., 2015).

    `h^(t) = RNN(x^(t), h^(t-1))` over `x^(1..T)`. With `reverse=True` every layer reads the
    source backwards, `x^(T..1)` (Sutskever et al.'s reversed source; with a padding mask it
    starts at the last real token), and its sequence is flipped back so that `h^(t)` belongs to
    `x^(t)`, as `keras.layers.Bidirectional` does for its backward layer; the final states are
    those after the whole source, `h^(T)` forwards, `h^(1)` reversed.

    With `num_layers = L > 1` the layers are stacked: layer `l > 1` reads the sequence of layer
    `l - 1` (dropout `layer_dropout` between them), and from the third layer up it adds its input
    to its output (residual connections, Wu et al., 2016, section 3.1):
    `h_l = RNN_l(dropout(h_{l-1})) + h_{l-1}` for `l >= 3`. The sequence returned is the top
    layer's; the final states of every layer come back, bottom layer first, ready to initialise
    a decoder of the same depth.

    Shapes: inputs `(batch, T, d)` → sequence `(batch, T, units)`; each final state
    `(batch, units)`.

    Args:
        units: size of the state.
        cell: `"lstm"` or `"gru"`.
        dropout: dropout on the inputs of each layer's RNN.
        use_cudnn: passed to the Keras RNNs (`"auto"`, True or False); exporting sets False so
            no Cudnn op reaches a SavedModel.
        reset_after: the GRU's form (`cell="gru"` only), as in
            `keras_attn.layers.BidirectionalEncoder`; False with an LSTM or with
            `use_cudnn=True` is a `ValueError`.
        num_layers: the number of stacked layers (default 1). Layer 1 is saved under `rnn`,
            layer `l > 1` under `rnn_<l>`.
        layer_dropout: dropout rate on the sequence passed from one layer to the next.
        reverse: read the source backwards (default False).

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
    >>> encoder = UnidirectionalEncoder(8, reverse=True)
    >>> sequence, *states = encoder(np.zeros((2, 5, 3), "float32"))
    >>> tuple(sequence.shape), [tuple(s.shape) for s in states]
    ((2, 5, 8), [(2, 8), (2, 8)])
    >>> deep = UnidirectionalEncoder(8, cell="gru", num_layers=3, layer_dropout=0.1)
    >>> sequence, *states = deep(np.zeros((2, 5, 3), "float32"))
    >>> tuple(sequence.shape), [tuple(s.shape) for s in states]
    ((2, 5, 8), [(2, 8), (2, 8), (2, 8)])

    References:
        Sutskever, Vinyals and Le, 2014, arXiv:1409.3215, section 3.3 (reversed source);
        Luong, Pham and Manning, 2015, arXiv:1508.04025, section 4.1; Wu et al., 2016,
        arXiv:1609.08144 (stacked layers, residual connections).
    """

    def __init__(
        self,
        units: int,
        cell: str = "lstm",
        dropout: float = 0.0,
        use_cudnn="auto",
        reset_after: bool = True,
        num_layers: int = 1,
        layer_dropout: float = 0.0,
        reverse: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(f"Expected units to be a positive integer. Received: units={units!r}")
        if cell not in _CELLS:
            raise ValueError(f"Expected cell in {sorted(_CELLS)}. Received: cell={cell!r}")
        if not isinstance(reverse, bool):
            raise ValueError(f"Expected reverse to be a bool. Received: reverse={reverse!r}")
        self.units = units
        self.cell = cell
        self.dropout = float(dropout)
        self.use_cudnn = use_cudnn
        self.reset_after = check_gru_form(cell, reset_after, use_cudnn)
        self.num_layers = check_num_layers(num_layers)
        self.layer_dropout = check_layer_dropout(layer_dropout)
        self.reverse = reverse
        self.states_per_layer = 2 if cell == "lstm" else 1
        self.num_states = self.states_per_layer * self.num_layers
        self.rnns = [
            self._make_layer("rnn" if layer == 1 else f"rnn_{layer}")
            for layer in range(1, self.num_layers + 1)
        ]
        self.layer_dropouts = [
            keras.layers.Dropout(
                self.layer_dropout, dtype=self.dtype_policy, name=f"dropout_{layer}"
            )
            for layer in range(2, self.num_layers + 1)
        ]
        self.supports_masking = True

    def _make_layer(self, name: str) -> keras.layers.RNN:
        """One layer of the stack, returning its sequence and final states."""
        return _CELLS[self.cell](
            self.units,
            return_sequences=True,
            return_state=True,
            go_backwards=self.reverse,
            dropout=self.dropout,
            use_cudnn=self.use_cudnn,
            **gru_form_kwargs(self.cell, self.reset_after),
            dtype=self.dtype_policy,
            name=name,
        )

    def set_use_cudnn(self, use_cudnn) -> None:
        """Switch every layer's Cudnn kernel on/off (False before tracing an export)."""
        self.use_cudnn = use_cudnn
        for rnn in self.rnns:
            rnn.use_cudnn = use_cudnn

    def build(self, inputs_shape):
        self.rnns[0].build(inputs_shape)
        # Every layer above the first reads the sequence (batch, T, units).
        sequence_shape = (*tuple(inputs_shape)[:2], self.units)
        for rnn, dropout in zip(self.rnns[1:], self.layer_dropouts, strict=True):
            dropout.build(sequence_shape)
            rnn.build(sequence_shape)
        self.built = True

    def _run(self, rnn, inputs, mask, training) -> tuple:
        """One layer: its sequence in source order and its final states."""
        sequence, *states = rnn(inputs, mask=mask, training=training)
        if self.reverse:
            # The RNN emits step t of x^(T..1) at position t: flip back to source order.
            sequence = ops.flip(sequence, axis=1)
        return sequence, states

    def call(self, inputs, mask=None, training=None):
        sequence, states = self._run(self.rnns[0], inputs, mask, training)
        for index in range(1, self.num_layers):
            layer_inputs = self.layer_dropouts[index - 1](sequence, training=training)
            outputs, layer_states = self._run(self.rnns[index], layer_inputs, mask, training)
            # Layers 3..L add their input to their output (Wu et al., 2016).
            sequence = outputs + sequence if index >= 2 else outputs
            states.extend(layer_states)
        return (sequence, *states)

    def compute_mask(self, inputs, mask=None):
        return (mask,) + (None,) * self.num_states

    def compute_output_shape(self, inputs_shape):
        batch, steps = inputs_shape[0], inputs_shape[1]
        return ((batch, steps, self.units),) + ((batch, self.units),) * self.num_states

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self,
                "units",
                "cell",
                "dropout",
                "use_cudnn",
                "reset_after",
                "num_layers",
                "layer_dropout",
                "reverse",
            )
        )
        return config
