"""The `keras.layers.RNN` wrapper shared by `ElmanRNN` and `JordanRNN` (not public)."""

from __future__ import annotations

import keras


class CellRNN(keras.layers.RNN):
    """`keras.layers.RNN` over a cell built from flat arguments, so that it serializes flat.

    Subclasses set `cell_class` (an `ElmanRNNCell` subclass). Keras' RNN supplies masking
    (padded steps keep the previous state and output), `go_backwards`, `stateful`, `unroll`,
    `return_sequences` and `return_state`, and makes the layer usable inside
    `keras.layers.Bidirectional`.
    """

    cell_class: type

    def __init__(
        self,
        units: int,
        output_units: int | None = None,
        activation="tanh",
        output_activation=None,
        return_sequences: bool = False,
        return_state: bool = False,
        go_backwards: bool = False,
        stateful: bool = False,
        unroll: bool = False,
        zero_output_for_mask: bool = False,
        **kwargs,
    ):
        cell = self.cell_class(
            units,
            output_units=output_units,
            activation=activation,
            output_activation=output_activation,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="cell",
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            zero_output_for_mask=zero_output_for_mask,
            **kwargs,
        )
        self.input_spec = keras.layers.InputSpec(ndim=3)

    @property
    def units(self) -> int:
        return self.cell.units

    @property
    def output_units(self) -> int | None:
        return self.cell.output_units

    @property
    def activation(self):
        return self.cell.activation

    @property
    def output_activation(self):
        return self.cell.output_activation

    def call(self, sequences, initial_state=None, mask=None, training=False):
        return super().call(sequences, initial_state=initial_state, mask=mask, training=training)

    def get_config(self):
        config = super().get_config()
        del config["cell"]
        cell_config = self.cell.get_config()
        for key in ("units", "output_units", "activation", "output_activation"):
            config[key] = cell_config[key]
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)
