"""A stack of Keras recurrent layers returning the top sequence and every layer's final state."""

from __future__ import annotations

import copy

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import check_choice, serialize_arguments
from keras_attn.layers.recurrent._bidirectional import bidirectional
from keras_attn.layers.recurrent._gru_form import check_gru_form, gru_form_kwargs

_CELLS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
_MERGE_MODES = ("concat", "sum", "mul", "ave")


def _per_layer(name: str, value, num_layers: int, kind: type | tuple) -> list:
    """`value` repeated for every layer, or the given per-layer list checked for length."""
    values = list(value) if isinstance(value, (list, tuple)) else [value] * num_layers
    if len(values) != num_layers or not all(isinstance(v, kind) for v in values):
        raise ValueError(
            f"Expected {name} to be one value or a list of {num_layers}. Received: {name}={value!r}"
        )
    return values


@keras_attn_export("keras_attn.layers.DeepRNN")
class DeepRNN(keras.layers.Layer):
    """Deep (stacked) recurrent encoder (Sutskever et al., 2014; Wu et al., 2016).

    Layer `l` reads the output sequence of layer `l - 1` (`h_0^(t) = x^(t)`):

        a_l^(t) = RNN_l(dropout(h_{l-1})^(t), a_l^(t-1))       (batch, w_l)
        h_l^(t) = a_l^(t) + h_{l-1}^(t)   with residual=True, l > 1 and w_l == w_{l-1}
        h_l^(t) = a_l^(t)                 otherwise

    `RNN_l` is a Keras `LSTM`/`GRU` (or a clone of any Keras RNN layer given as `cell`), so the
    cuDNN kernel is kept. With `bidirectional`, `RNN_l` is `keras.layers.Bidirectional`:
    `w_l = 2 * units_l` for `merge_mode="concat"`, `units_l` otherwise, and the layer's
    final states are `[h_fwd^(T); h_bwd^(1)]`. The final states of every layer come back, bottom
    layer first, ready to initialise a decoder of the same depth (`C = q(h^(1..T))`).

    Shapes: inputs `(batch, T, d)` → sequence `(batch, T, w_L)`; the states of layer `l` are
    `(batch, units_l)` each (`2 * units_l` when bidirectional).

    Args:
        units: state size of every layer (an int, with `num_layers`) or a list, one per layer.
        num_layers: number of layers when `units` is an int (default 2); with a list of units it
            must be None or `len(units)`.
        cell: `"lstm"`, `"gru"`, or a Keras RNN layer (instance or its serialized config, e.g.
            `keras.layers.SimpleRNN(4, activation="relu")`) used as a template: every layer is a
            fresh copy of it with its own `units`. Its config must have a `units` key.
        bidirectional: wrap every layer (a bool) or the chosen layers (a list of bools) in
            `keras.layers.Bidirectional`.
        merge_mode: how bidirectional layers merge their two sequences: `"concat"`, `"sum"`,
            `"mul"` or `"ave"`.
        residual: add each layer's input to its output where both widths are equal (never on the
            first layer, whose input is the embedding; Wu et al. 2016 section 3.1).
        dropout: dropout rate on the sequence passed from one layer to the next (one float, or a
            list of `num_layers - 1`); not applied to the inputs or to the top sequence.
        use_cudnn: passed to Keras' `LSTM`/`GRU` (`"auto"`, True or False); exporting sets
            False so no Cudnn op reaches a SavedModel.
        reset_after: the GRU's form (`cell="gru"` only). True (the default, Keras' and cuDNN's):
            `h~ = tanh(x W_h + b_h + r ⊙ (h^(t-1) U_h + b'_h))`, the fused cuDNN kernel on a GPU.
            False: Cho et al.'s equations, `h~ = tanh(x W_h + (r ⊙ h^(t-1)) U_h + b_h)`, which
            have no cuDNN kernel (the generic loop on every device). False with another `cell` than
            `"gru"` (a template layer sets its own) or with `use_cudnn=True` is a `ValueError`.

    Call arguments:
        inputs: `(batch, T, d)`.
        mask: bool `(batch, T)`, filled from Keras masking; padded steps are skipped by every
            layer (the states are those of the last real step) and the returned sequence is 0
            there, so nothing depends on the values at padded steps.
        training: enables dropout.

    Returns:
        A flat tuple `(sequence, *states)`: the top sequence `(batch, T, w_L)`, then every
        layer's final states in order (`h, c` per LSTM layer, `h` per GRU layer).
        `states_per_layer` gives how many states each layer contributes (known once built).

    Example:

    >>> import numpy as np
    >>> rnn = DeepRNN(8, num_layers=3, cell="gru", residual=True)
    >>> sequence, *states = rnn(np.zeros((2, 5, 3), "float32"))
    >>> tuple(sequence.shape), [tuple(s.shape) for s in states], rnn.states_per_layer
    ((2, 5, 8), [(2, 8), (2, 8), (2, 8)], [1, 1, 1])

    References:
        Graves, Mohamed and Hinton, 2013, "Speech recognition with deep recurrent neural
        networks", arXiv:1303.5778; Sutskever, Vinyals and Le, 2014, arXiv:1409.3215; Wu et al.,
        2016, "Google's neural machine translation system", arXiv:1609.08144 (residual stacks).
    """

    def __init__(
        self,
        units,
        num_layers: int | None = None,
        cell="lstm",
        bidirectional=False,
        merge_mode: str = "concat",
        residual: bool = False,
        dropout=0.0,
        use_cudnn="auto",
        reset_after: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(units, (list, tuple)):
            if num_layers is not None and num_layers != len(units):
                raise ValueError(
                    f"Expected num_layers=None or len(units). Received: units={units!r}, "
                    f"num_layers={num_layers!r}"
                )
            layers_units = list(units)
        else:
            depth = 2 if num_layers is None else num_layers
            if not isinstance(depth, int) or depth <= 0:
                raise ValueError(
                    f"Expected num_layers to be a positive integer. Received: "
                    f"num_layers={num_layers!r}"
                )
            layers_units = [units] * depth
        if not layers_units or not all(isinstance(u, int) and u > 0 for u in layers_units):
            raise ValueError(
                f"Expected units to be a positive integer or a list of them. Received: "
                f"units={units!r}"
            )
        check_choice("merge_mode", merge_mode, _MERGE_MODES)
        depth = len(layers_units)
        self._layers_units = layers_units
        self._bidirectional = _per_layer("bidirectional", bidirectional, depth, bool)
        self._dropout = [
            float(rate) for rate in _per_layer("dropout", dropout, depth - 1, (int, float))
        ]
        if not all(0.0 <= rate < 1.0 for rate in self._dropout):
            raise ValueError(f"Expected dropout rates in [0, 1). Received: dropout={dropout!r}")
        self._template = self._template_config(cell)
        self.units = units
        self.num_layers = num_layers
        self.cell = cell
        self.bidirectional = bidirectional
        self.merge_mode = merge_mode
        self.residual = bool(residual)
        self.dropout = dropout
        self.use_cudnn = use_cudnn
        self.reset_after = check_gru_form(cell, reset_after, use_cudnn)
        self.supports_masking = True

    @staticmethod
    def _template_config(cell) -> dict | None:
        """Serialized template RNN layer, or None for `"lstm"`/`"gru"`; validated here."""
        if isinstance(cell, str):
            if cell not in _CELLS:
                raise ValueError(
                    f"Expected cell in {sorted(_CELLS)} or a Keras RNN layer. Received: "
                    f"cell={cell!r}"
                )
            return None
        if isinstance(cell, keras.layers.Layer):
            config = keras.saving.serialize_keras_object(cell)
        elif isinstance(cell, dict):
            config = copy.deepcopy(cell)
        else:
            raise ValueError(
                f"Expected cell in {sorted(_CELLS)} or a Keras RNN layer. Received: cell={cell!r}"
            )
        layer = keras.saving.deserialize_keras_object(copy.deepcopy(config))
        if not isinstance(layer, keras.layers.RNN) or "units" not in config.get("config", {}):
            raise ValueError(
                f"Expected cell to be a Keras RNN layer whose config has 'units'. Received: "
                f"cell={cell!r}"
            )
        return config

    def _make_rnn(self, index: int, units: int) -> keras.layers.Layer:
        """Layer `index`'s Keras RNN (returning sequences and states), unwrapped."""
        if self._template is None:
            return _CELLS[self.cell](
                units,
                return_sequences=True,
                return_state=True,
                use_cudnn=self.use_cudnn,
                **gru_form_kwargs(self.cell, self.reset_after),
                dtype=self.dtype_policy,
                name=f"{self.cell}_{index}",
            )
        template = copy.deepcopy(self._template)
        layer_config = {
            **template["config"],
            "units": units,
            "return_sequences": True,
            "return_state": True,
            "name": f"rnn_{index}",
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
        }
        layer = keras.saving.deserialize_keras_object({**template, "config": layer_config})
        if hasattr(layer, "use_cudnn"):
            layer.use_cudnn = self.use_cudnn
        return layer

    def build(self, inputs_shape):
        self.rnn_layers = []
        self.dropout_layers = []
        self._residual_at = []
        self.states_per_layer = []
        shape = tuple(inputs_shape)
        for index, units in enumerate(self._layers_units):
            rnn = self._make_rnn(index, units)
            if self._bidirectional[index]:
                rnn = bidirectional(
                    rnn,
                    merge_mode=self.merge_mode,
                    name=f"bidirectional_{index}",
                    dtype=self.dtype_policy,
                )
            if index > 0:
                dropout = keras.layers.Dropout(
                    self._dropout[index - 1], name=f"dropout_{index}", dtype=self.dtype_policy
                )
                dropout.build(shape)
                self.dropout_layers.append(dropout)
            rnn.build(shape)
            output_shape = rnn.compute_output_shape(shape)[0]
            self._residual_at.append(self.residual and index > 0 and output_shape[-1] == shape[-1])
            cell = rnn.forward_layer.cell if self._bidirectional[index] else rnn.cell
            state_size = cell.state_size
            self.states_per_layer.append(
                len(state_size) if isinstance(state_size, (list, tuple)) else 1
            )
            self.rnn_layers.append(rnn)
            shape = tuple(output_shape)
        self.built = True

    def set_use_cudnn(self, use_cudnn) -> None:
        """Switch every layer's Cudnn kernel on/off (False before tracing an export)."""
        self.use_cudnn = use_cudnn
        for rnn in self.rnn_layers:
            directions = (
                (rnn.forward_layer, rnn.backward_layer)
                if isinstance(rnn, keras.layers.Bidirectional)
                else (rnn,)
            )
            for layer in directions:
                if hasattr(layer, "use_cudnn"):
                    layer.use_cudnn = use_cudnn

    def call(self, inputs, mask=None, training=None):
        sequence = inputs
        states = []
        for index, rnn in enumerate(self.rnn_layers):
            layer_inputs = sequence
            if index > 0:
                layer_inputs = self.dropout_layers[index - 1](sequence, training=training)
            outputs = rnn(layer_inputs, mask=mask, training=training)
            count = self.states_per_layer[index]
            if self._bidirectional[index]:
                forward, backward = outputs[1 : 1 + count], outputs[1 + count :]
                states.extend(
                    ops.concatenate([f, b], axis=-1) for f, b in zip(forward, backward, strict=True)
                )
            else:
                states.extend(outputs[1:])
            sequence = outputs[0] + sequence if self._residual_at[index] else outputs[0]
        if mask is not None:
            sequence = ops.where(ops.expand_dims(mask, -1), sequence, ops.zeros_like(sequence))
        return (sequence, *states)

    def compute_mask(self, inputs, mask=None):
        return (mask,) + (None,) * sum(self.states_per_layer)

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self,
                "units",
                "num_layers",
                "cell",
                "bidirectional",
                "merge_mode",
                "residual",
                "dropout",
                "use_cudnn",
                "reset_after",
            )
        )
        return config
