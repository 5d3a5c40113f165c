"""The `keras.layers.RNN` wrapper of the cells that serialize flat (not public)."""

from __future__ import annotations

import keras

from keras_attn._private import backend_rnn
from keras_attn.layers.recurrent.elman_rnn_cell import CELL_ARGUMENTS, INITIALIZERS


def cell_argument(name: str) -> property:
    """A read-only attribute that reads the cell's constructor argument `name`."""
    return property(lambda self: getattr(self.cell, name), doc=f"The cell's `{name}`.")


class CellRNN(keras.layers.RNN):
    """`keras.layers.RNN` over a cell built from flat arguments, so that it serializes flat.

    Subclasses set `cell_class` and `cell_arguments` (the names of the cell's constructor
    arguments the layer takes, in config order), and pass those arguments to `__init__` as a
    dict. Keras' RNN supplies masking (padded steps keep the previous state and output),
    `go_backwards`, `stateful`, `unroll`, `return_sequences` and `return_state`, and makes the
    layer usable inside `keras.layers.Bidirectional`. The cell is named `"cell"`.
    """

    cell_class: type
    cell_arguments: tuple[str, ...]

    def __init__(
        self,
        cell_kwargs: dict,
        return_sequences: bool = False,
        return_state: bool = False,
        go_backwards: bool = False,
        stateful: bool = False,
        unroll: bool = False,
        zero_output_for_mask: bool = False,
        **kwargs,
    ):
        cell = self.cell_class(
            **cell_kwargs,
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

    def call(self, sequences, initial_state=None, mask=None, training=False):
        return super().call(sequences, initial_state=initial_state, mask=mask, training=training)

    def inner_loop(self, sequences, initial_state, mask, training=False):
        if mask is None:
            return super().inner_loop(sequences, initial_state, mask, training=training)
        # A padded step repeats the previous output. Keras' JAX loop reads that output from the
        # first state, which is not the output of these cells: the output rides along as state 0.
        cell_kwargs = {"training": training} if self.cell._call_has_training_arg else {}

        def step(inputs, states):
            output, new_states = self.cell(inputs, list(states[1:]), **cell_kwargs)
            return output, [output, *keras.tree.flatten(new_states)]

        batch_size = keras.ops.shape(sequences)[0]
        no_output = keras.ops.zeros((batch_size, self.cell.output_size), self.compute_dtype)
        last_output, outputs, states = backend_rnn(
            step,
            sequences,
            [no_output, *keras.tree.flatten(initial_state)],
            go_backwards=self.go_backwards,
            mask=mask,
            unroll=self.unroll,
            input_length=sequences.shape[1],
            zero_output_for_mask=self.zero_output_for_mask,
            return_all_outputs=self.return_sequences,
        )
        return last_output, outputs, states[1:]

    def get_config(self):
        config = super().get_config()
        del config["cell"]
        cell_config = self.cell.get_config()
        for key in self.cell_arguments:
            config[key] = cell_config[key]
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class ElmanFamilyRNN(CellRNN):
    """`CellRNN` over an `ElmanRNNCell` subclass: hidden size, output size and activations."""

    cell_arguments = CELL_ARGUMENTS

    def __init__(
        self,
        units: int,
        output_units: int | None = None,
        activation="tanh",
        output_activation=None,
        **kwargs,
    ):
        cell_kwargs = {
            "units": units,
            "output_units": output_units,
            "activation": activation,
            "output_activation": output_activation,
            # kernel_initializer, recurrent_initializer, bias_initializer, when given
            **{name: kwargs.pop(name) for name in INITIALIZERS if name in kwargs},
        }
        super().__init__(cell_kwargs, **kwargs)


# ElmanRNN.units, .activation, ...: the cell's arguments.
for _name in CELL_ARGUMENTS:
    setattr(ElmanFamilyRNN, _name, cell_argument(_name))
del _name
