"""Jordan network: a recurrent layer whose previous output is fed back."""

from __future__ import annotations

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.recurrent._cell_rnn import ElmanFamilyRNN
from keras_attn.layers.recurrent.jordan_rnn_cell import JordanRNNCell


@keras_attn_export("keras_attn.layers.JordanRNN")
class JordanRNN(ElmanFamilyRNN):
    """Output-to-hidden recurrent network (Jordan, 1986).

    For `x` `(batch, T, d)`, from `o^(0) = 0` (or `initial_state`):

        h^(t) = activation(x^(t) W_x + o^(t-1) W_o + b)           (batch, units)
        o^(t) = output_activation(h^(t) W_out + b_out)            (batch, output_units)

    The state carried from step to step is the previous output `o^(t-1)` `(batch, q)`, not the
    hidden layer: the network can only remember what it writes to its output, so unless `q` is
    large, information in `h^(t-1), h^(t-2), …` is lost (Goodfellow et al., 2016, section
    10.2.1). The weights live in `JordanRNNCell` (`layer.cell`). With `return_sequences=False`
    it is a summarising RNN (one output for the whole sequence) with output feedback.

    Args:
        units: size of the hidden layer.
        output_units: size `q` of the output, which is also the fed-back state (required).
        activation: hidden activation.
        output_activation: activation of the output (applied before it is fed back).
        kernel_initializer, recurrent_initializer, bias_initializer: how the cell's input and
            output kernels, its `(q, k)` recurrent kernel and its biases start.
        return_sequences: return `o^(1..T)` `(batch, T, q)` instead of `o^(T)` `(batch, q)`.
        return_state: also return the final state `o^(T)` `(batch, q)`.
        go_backwards: read the sequence from `T` to 1 (as `keras.layers.Bidirectional` does).
        stateful: keep the last state of each batch row as the next batch's initial state.
        unroll: unroll the loop (short, static `T` only).
        zero_output_for_mask: outputs at padded steps are zeros instead of the previous output.

    Call arguments:
        sequences: `(batch, T, d)`.
        initial_state: `[o^(0)]`, `(batch, output_units)`.
        mask: bool `(batch, T)`; filled from Keras masking. Padded steps leave the state
            unchanged, so they contribute nothing.
        training: unused (no dropout).

    Returns:
        `o^(T)` `(batch, q)` or `o^(1..T)` `(batch, T, q)`; with `return_state`,
        `(outputs, o^(T))`.

    Example:

    >>> import numpy as np
    >>> rnn = JordanRNN(8, output_units=3, return_sequences=True)
    >>> tuple(rnn(np.zeros((2, 5, 4), "float32")).shape)
    (2, 5, 3)

    References:
        Jordan, 1986, "Serial order: a parallel distributed processing approach", ICS Report
        8604; Goodfellow, Bengio and Courville, 2016, "Deep Learning", section 10.2.
    """

    cell_class = JordanRNNCell

    def __init__(self, units: int, output_units: int, **kwargs):
        super().__init__(units, output_units=output_units, **kwargs)
