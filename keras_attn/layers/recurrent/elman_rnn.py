"""Elman network: a recurrent layer whose hidden state is fed back."""

from __future__ import annotations

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.recurrent._cell_rnn import ElmanFamilyRNN
from keras_attn.layers.recurrent.elman_rnn_cell import ElmanRNNCell


@keras_attn_export("keras_attn.layers.ElmanRNN")
class ElmanRNN(ElmanFamilyRNN):
    """Hidden-to-hidden recurrent network (Elman, 1990).

    For `x` `(batch, T, d)`, from `h^(0) = 0` (or `initial_state`):

        h^(t) = activation(x^(t) W_x + h^(t-1) W_h + b)          (batch, units)
        o^(t) = output_activation(h^(t) W_out + b_out)            (batch, output_units)

    Without `output_units`, `o^(t) = h^(t)` and the layer computes exactly Keras' `SimpleRNN`.
    The weights live in `ElmanRNNCell` (`layer.cell`).

    With `return_sequences=False` (the default) the layer returns only `o^(T)`: a summarising
    RNN with a single output for the whole sequence (e.g. the sentiment of a sentence). With
    masking, `o^(T)` is the output of the last real step.

    Args:
        units: size of the hidden state.
        output_units: size of the output projection, or None for `o = h`.
        activation: hidden activation.
        output_activation: activation of the projection; needs `output_units`.
        kernel_initializer, recurrent_initializer, bias_initializer: those of the cell's weights
            (see `ElmanRNNCell`; `activation="relu", recurrent_initializer="identity"` is
            Le et al.'s IRNN).
        return_sequences: return `o^(1..T)` `(batch, T, q)` instead of `o^(T)` `(batch, q)`.
        return_state: also return `h^(T)` `(batch, units)`.
        go_backwards: read the sequence from `T` to 1 (as `keras.layers.Bidirectional` does).
        stateful: keep the last state of each batch row as the next batch's initial state.
        unroll: unroll the loop (short, static `T` only).
        zero_output_for_mask: outputs at padded steps are zeros instead of the previous output.

    Call arguments:
        sequences: `(batch, T, d)`.
        initial_state: `[h^(0)]`, `(batch, units)`.
        mask: bool `(batch, T)`; filled from Keras masking. Padded steps leave the state
            unchanged, so they contribute nothing.
        training: unused (no dropout).

    Returns:
        `o^(T)` `(batch, q)` or `o^(1..T)` `(batch, T, q)` (`q = output_units or units`);
        with `return_state`, `(outputs, h^(T))`.

    Example:

    >>> import numpy as np
    >>> rnn = ElmanRNN(8, output_units=3, return_sequences=True, return_state=True)
    >>> outputs, state = rnn(np.zeros((2, 5, 4), "float32"))
    >>> tuple(outputs.shape), tuple(state.shape)
    ((2, 5, 3), (2, 8))

    References:
        Elman, 1990, "Finding structure in time", Cognitive Science 14(2); Goodfellow, Bengio
        and Courville, 2016, "Deep Learning", section 10.2.
    """

    cell_class = ElmanRNNCell
