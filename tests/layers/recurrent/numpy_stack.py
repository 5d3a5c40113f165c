"""NumPy reference of a stacked LSTM step (residual connections from the third layer up)."""

from keras import ops

from tests import numpy_reference as ref


def cell_weights(cell) -> tuple:
    """`(kernel, recurrent_kernel, bias)` of a Keras LSTM cell as NumPy arrays."""
    return (
        ops.convert_to_numpy(cell.kernel),
        ops.convert_to_numpy(cell.recurrent_kernel),
        ops.convert_to_numpy(cell.bias),
    )


def decoder_cells(decoder, bottom_cell) -> list:
    """The weights of every layer of a recurrent decoder's stack, bottom layer first."""
    upper = [rnn.cell for rnn in getattr(decoder, "upper_rnns", [])]
    return [cell_weights(cell) for cell in [bottom_cell, *upper]]


def lstm_stack_step(x, states, cells):
    """One step of stacked LSTMs; `states` `[h_1, c_1, ..., h_L, c_L]`, `cells` per layer.

    a_l = LSTM_l(h_{l-1}), h_l = a_l + h_{l-1} for l >= 3 (Wu et al., 2016), h_0 = x.
    Returns `(h_L, new states)`.
    """
    new_states, inputs = [], x
    for index, weights in enumerate(cells):
        h, c = ref.lstm_step(inputs, states[2 * index], states[2 * index + 1], *weights)
        new_states += [h, c]
        inputs = h + inputs if index >= 2 else h
    return inputs, new_states
