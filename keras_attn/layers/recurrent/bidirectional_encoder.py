"""Bidirectional recurrent encoder returning the sequence and decoder-ready final states."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.recurrent._bidirectional import bidirectional
from keras_attn.layers.recurrent._gru_form import check_gru_form, gru_form_kwargs

_CELLS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
_MERGE_MODES = ("concat", "sum", "mul", "ave")


@keras_attn_export("keras_attn.layers.BidirectionalEncoder")
class BidirectionalEncoder(keras.layers.Layer):
    """Bidirectional LSTM/GRU encoder (Schuster and Paliwal, 1997; Bahdanau et al., 2015).

    `h^(t) = [h_fwd^(t); h_bwd^(t)]` for `merge_mode="concat"`, where the forward RNN reads
    `x^(1..T)` and the backward one `x^(T..1)`. The final states of both directions are
    concatenated, `[h_fwd^(T); h_bwd^(1)]` (and likewise the LSTM cell state), ready to initialise
    a decoder (`C = q(h^(1), …, h^(T))`).

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

    Call arguments:
        inputs: `(batch, T, d)`.
        mask: bool `(batch, T)`, filled from Keras masking (e.g. `Embedding(mask_zero=True)`);
            padded steps are skipped, so outputs do not depend on padding values.
        training: enables dropout.

    Returns:
        A flat tuple, as Keras RNNs with `return_state=True`: `(sequence, h, c)` for an LSTM,
        `(sequence, h)` for a GRU (`num_states` tells which).

    Example:

    >>> import numpy as np
    >>> encoder = BidirectionalEncoder(8)
    >>> sequence, *states = encoder(np.zeros((2, 5, 3), "float32"))
    >>> tuple(sequence.shape), [tuple(s.shape) for s in states]
    ((2, 5, 16), [(2, 16), (2, 16)])

    References:
        Schuster and Paliwal, 1997, "Bidirectional recurrent neural networks"; Bahdanau, Cho and
        Bengio, 2015, arXiv:1409.0473, section 3.2.
    """

    def __init__(
        self,
        units: int,
        cell: str = "lstm",
        merge_mode: str = "concat",
        dropout: float = 0.0,
        use_cudnn="auto",
        reset_after: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(f"Expected units to be a positive integer. Received: units={units!r}")
        if cell not in _CELLS:
            raise ValueError(f"Expected cell in {sorted(_CELLS)}. Received: cell={cell!r}")
        if merge_mode not in _MERGE_MODES:
            raise ValueError(
                f"Expected merge_mode in {list(_MERGE_MODES)}. Received: merge_mode={merge_mode!r}"
            )
        self.units = units
        self.cell = cell
        self.merge_mode = merge_mode
        self.dropout = float(dropout)
        self.use_cudnn = use_cudnn
        self.reset_after = check_gru_form(cell, reset_after, use_cudnn)
        self.num_states = 2 if cell == "lstm" else 1
        rnn_cls = _CELLS[cell]
        self.rnn = bidirectional(
            rnn_cls(
                units,
                return_sequences=True,
                return_state=True,
                dropout=self.dropout,
                use_cudnn=use_cudnn,
                **gru_form_kwargs(cell, self.reset_after),
                dtype=self.dtype_policy,
            ),
            merge_mode=merge_mode,
            name="bidirectional",
            dtype=self.dtype_policy,
        )
        self.supports_masking = True

    def set_use_cudnn(self, use_cudnn) -> None:
        """Switch both directions' Cudnn kernels on/off (False before tracing an export)."""
        self.use_cudnn = use_cudnn
        for layer in (self.rnn.forward_layer, self.rnn.backward_layer):
            layer.use_cudnn = use_cudnn

    def build(self, inputs_shape):
        self.rnn.build(inputs_shape)
        self.built = True

    def call(self, inputs, mask=None, training=None):
        outputs = self.rnn(inputs, mask=mask, training=training)
        sequence = outputs[0]
        forward_states = outputs[1 : 1 + self.num_states]
        backward_states = outputs[1 + self.num_states :]
        states = [
            ops.concatenate([forward, backward], axis=-1)
            for forward, backward in zip(forward_states, backward_states, strict=True)
        ]
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
            units=self.units,
            cell=self.cell,
            merge_mode=self.merge_mode,
            dropout=self.dropout,
            use_cudnn=self.use_cudnn,
            reset_after=self.reset_after,
        )
        return config
