"""One step of the hidden-to-hidden (Elman) recurrence, with an optional output projection."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.recurrent._optional_activation import (
    get_optional_activation,
)

# The constructor arguments an Elman (or Jordan) cell keeps in its config, and that `ElmanRNN`
# and `JordanRNN` take for their cell.
CELL_ARGUMENTS = (
    "units",
    "output_units",
    "activation",
    "output_activation",
    "kernel_initializer",
    "recurrent_initializer",
    "bias_initializer",
)
INITIALIZERS = CELL_ARGUMENTS[4:]


def _initializer(given):
    """A fresh initializer for one weight from a cell's argument: a name as it is (Keras makes a
    new instance per weight), an instance or a config dict rebuilt from its config. An unseeded
    instance shared by two weights would draw the same values for both."""
    if isinstance(given, str):
        return given
    if isinstance(given, keras.initializers.Initializer):
        given = keras.saving.serialize_keras_object(given)
    return keras.initializers.get(given)


@keras_attn_export("keras_attn.layers.ElmanRNNCell")
class ElmanRNNCell(keras.layers.Layer):
    """Cell of the Elman network (Elman, 1990): the hidden state is fed back.

        h^(t) = activation(x^(t) W_x + h^(t-1) W_h + b)          (batch, units)
        o^(t) = output_activation(h^(t) W_out + b_out)            (batch, output_units)

    with `W_x` `(d, units)` (`kernel`), `W_h` `(units, units)` (`recurrent_kernel`), `b`
    `(units,)` (`bias`), `W_out` `(units, output_units)` (`output_kernel`) and `b_out`
    `(output_units,)` (`output_bias`). Without `output_units` there is no projection and
    `o^(t) = h^(t)` (Keras' `SimpleRNNCell`).

    The state fed back to the next step is `h^(t)` (the `feedback` hook); `JordanRNNCell` feeds
    back `o^(t)` instead. Use it inside `keras.layers.RNN` or through `ElmanRNN`.

    Args:
        units: size `k` of the hidden state `h`.
        output_units: size `q` of the output projection; None for no projection (`o = h`).
        activation: the hidden activation.
        output_activation: applied to the projection; needs `output_units`.
        kernel_initializer: initializer of `W_x` (and of `W_out`).
        recurrent_initializer: initializer of `W_h`; orthogonal by default. `"identity"` with
            `activation="relu"` is Le et al.'s IRNN: at initialisation the state is carried
            over unchanged, so gradients through time neither vanish nor explode.
        bias_initializer: initializer of `b` (and of `b_out`).

    Call arguments:
        inputs: `x^(t)` `(batch, d)`.
        states: `[h^(t-1)]`, `(batch, units)`.
        training: unused (no dropout).

    Returns:
        `(o^(t), [h^(t)])`.

    Example:

    >>> import numpy as np
    >>> rnn = keras.layers.RNN(ElmanRNNCell(4, output_units=2), return_sequences=True)
    >>> tuple(rnn(np.zeros((3, 5, 6), "float32")).shape)
    (3, 5, 2)

    References:
        Elman, 1990, "Finding structure in time", Cognitive Science 14(2); Goodfellow, Bengio
        and Courville, 2016, "Deep Learning", section 10.2; Le, Jaitly and Hinton, 2015, "A
        simple way to initialize recurrent networks of rectified linear units" (IRNN).
    """

    def __init__(
        self,
        units: int,
        output_units: int | None = None,
        activation="tanh",
        output_activation=None,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(f"Expected units to be a positive integer. Received: units={units!r}")
        if output_units is not None and (not isinstance(output_units, int) or output_units <= 0):
            raise ValueError(
                "Expected output_units to be None or a positive integer. "
                f"Received: output_units={output_units!r}"
            )
        if output_activation is not None and output_units is None:
            raise ValueError(
                "output_activation needs an output projection; set output_units. "
                f"Received: output_activation={output_activation!r}, output_units=None"
            )
        self.units = units
        self.output_units = output_units
        self.activation = keras.activations.get(activation)
        self.output_activation = get_optional_activation(output_activation)
        # As given (a name, a config dict or an instance): each weight gets its own initializer
        # when the cell is built (`_initializer`).
        self.kernel_initializer = kernel_initializer
        self.recurrent_initializer = recurrent_initializer
        self.bias_initializer = bias_initializer
        self.state_size = self.feedback_size
        self.output_size = units if output_units is None else output_units

    @property
    def feedback_size(self) -> int:
        """Size of the state fed back to the next step: `h^(t)`, `units`."""
        return self.units

    def feedback(self, hidden, output):
        """The state fed back to the next step, from `h^(t)` and `o^(t)`: here `h^(t)`."""
        return hidden

    def build(self, input_shape):
        self.kernel = self.add_weight(
            shape=(input_shape[-1], self.units),
            initializer=_initializer(self.kernel_initializer),
            name="kernel",
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self.feedback_size, self.units),
            initializer=_initializer(self.recurrent_initializer),
            name="recurrent_kernel",
        )
        self.bias = self.add_weight(
            shape=(self.units,), initializer=_initializer(self.bias_initializer), name="bias"
        )
        if self.output_units is not None:
            self.output_kernel = self.add_weight(
                shape=(self.units, self.output_units),
                initializer=_initializer(self.kernel_initializer),
                name="output_kernel",
            )
            self.output_bias = self.add_weight(
                shape=(self.output_units,),
                initializer=_initializer(self.bias_initializer),
                name="output_bias",
            )
        self.built = True

    def call(self, inputs, states, training=None):
        previous = states[0] if isinstance(states, (list, tuple)) else states
        # h^(t): (batch, d) x (d, k) + (batch, k_fb) x (k_fb, k) + (k,) -> (batch, k)
        hidden = ops.matmul(inputs, self.kernel) + ops.matmul(previous, self.recurrent_kernel)
        hidden = self.activation(hidden + self.bias)
        output = hidden
        if self.output_units is not None:
            # o^(t): (batch, k) x (k, q) + (q,) -> (batch, q)
            output = ops.matmul(hidden, self.output_kernel) + self.output_bias
            if self.output_activation is not None:
                output = self.output_activation(output)
        return output, [self.feedback(hidden, output)]

    def get_initial_state(self, batch_size=None):
        return [ops.zeros((batch_size, self.state_size), dtype=self.compute_dtype)]

    def get_config(self):
        config = super().get_config()
        config.update(serialize_arguments(self, *CELL_ARGUMENTS))
        return config
