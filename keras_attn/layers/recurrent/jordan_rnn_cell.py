"""One step of the output-to-hidden (Jordan) recurrence."""

from __future__ import annotations

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.recurrent.elman_rnn_cell import ElmanRNNCell


@keras_attn_export("keras_attn.layers.JordanRNNCell")
class JordanRNNCell(ElmanRNNCell):
    """Cell of the Jordan network (Jordan, 1986): the previous OUTPUT is fed back.

        h^(t) = activation(x^(t) W_x + o^(t-1) W_o + b)           (batch, units)
        o^(t) = output_activation(h^(t) W_out + b_out)            (batch, output_units)

    with `W_x` `(d, units)` (`kernel`), `W_o` `(output_units, units)` (`recurrent_kernel`),
    `b` `(units,)`, `W_out` `(units, output_units)`, `b_out` `(output_units,)`. The state is
    `o^(t)`, not `h^(t)`: whatever the network remembers must pass through its output, so with a
    small `output_units` most of `h^(t-1), h^(t-2), …` is lost (Goodfellow et al., 2016,
    section 10.2.1). The weights are those of `ElmanRNNCell`; only the fed-back state differs
    (the `feedback` hook).

    Args:
        units: size of the hidden layer `h`.
        output_units: size `q` of the output `o`, which is also the state size (required).
        activation: hidden activation.
        output_activation: applied to the output before it is returned and fed back.

    Call arguments:
        inputs: `x^(t)` `(batch, d)`.
        states: `[o^(t-1)]`, `(batch, output_units)`.
        training: unused (no dropout).

    Returns:
        `(o^(t), [o^(t)])`.

    Example:

    >>> import keras, numpy as np
    >>> cell = JordanRNNCell(8, output_units=3)
    >>> output, states = cell(np.ones((2, 5), "float32"), [np.zeros((2, 3), "float32")])
    >>> tuple(output.shape), bool(np.all(states[0] == output))
    ((2, 3), True)

    References:
        Jordan, 1986, "Serial order: a parallel distributed processing approach", ICS Report 8604.
    """

    def __init__(
        self,
        units: int,
        output_units: int,
        activation="tanh",
        output_activation=None,
        **kwargs,
    ):
        if output_units is None:
            raise ValueError(
                "A Jordan cell feeds its output back, so it needs output_units. "
                "Received: output_units=None"
            )
        super().__init__(
            units,
            output_units=output_units,
            activation=activation,
            output_activation=output_activation,
            **kwargs,
        )

    @property
    def feedback_size(self) -> int:
        """Size of the state fed back to the next step: `o^(t)`, `output_units`."""
        return self.output_units

    def feedback(self, hidden, output):
        """The state fed back to the next step: `o^(t)`."""
        return output
