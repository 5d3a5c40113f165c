"""Neural Turing Machine: `NTMCell` run over a sequence by `keras.layers.RNN`."""

from __future__ import annotations

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.recurrent._cell_rnn import CellRNN, cell_argument
from keras_attn.layers.recurrent.ntm_cell import NTMCell


@keras_attn_export("keras_attn.layers.NeuralTuringMachine")
class NeuralTuringMachine(CellRNN):
    """Neural Turing Machine (Graves et al., 2014) over a sequence, built from flat arguments.

    For `x` `(batch, T, d)` runs `NTMCell` (see its docstring for the equations: LSTM
    controller, content + location addressing, erase/add writes, reads) from its initial state
    (memory a small constant, previous weightings one-hot on location 0) or `initial_state`:

        y^(t), state^(t) = NTMCell(x^(t), state^(t-1))         y^(t): (batch, q)

    `q = output_units`, or `controller_units + num_read_heads * memory_width` without a
    projection. The weights live in the cell (`layer.cell`). Keras' `RNN` supplies masking
    (padded steps leave the state, memory included, unchanged), `go_backwards`, `stateful`,
    `unroll` and `return_state`.

    Args:
        controller_units, memory_size, memory_width, num_read_heads, num_write_heads,
            shift_range, output_units, clip_value, memory_initial_value: as in `NTMCell`.
        return_sequences: return `y^(1..T)` `(batch, T, q)` (the default) instead of `y^(T)`.
        return_state: also return the five final state tensors of `NTMCell`.
        go_backwards: read the sequence from `T` to 1.
        stateful: keep the last state of each batch row as the next batch's initial state.
        unroll: unroll the loop (short, static `T` only).
        zero_output_for_mask: outputs at padded steps are zeros instead of the previous output.

    Call arguments:
        sequences: `(batch, T, d)`.
        initial_state: the five state tensors of `NTMCell`.
        mask: bool `(batch, T)`; filled from Keras masking. Padded steps contribute nothing.
        training: unused (no dropout).

    Returns:
        `y^(1..T)` `(batch, T, q)` or `y^(T)` `(batch, q)`; with `return_state`,
        `[outputs, h, c, memory, reads, weights]`.

    Example:

    >>> import numpy as np
    >>> ntm = NeuralTuringMachine(8, memory_size=6, memory_width=4, output_units=3)
    >>> tuple(ntm(np.zeros((2, 5, 7), "float32")).shape)
    (2, 5, 3)

    References:
        Graves, Wayne and Danihelka, 2014, "Neural Turing Machines", arXiv:1410.5401.
    """

    cell_class = NTMCell
    cell_arguments = (
        "controller_units",
        "memory_size",
        "memory_width",
        "num_read_heads",
        "num_write_heads",
        "shift_range",
        "output_units",
        "clip_value",
        "memory_initial_value",
    )

    def __init__(
        self,
        controller_units: int,
        memory_size: int = 128,
        memory_width: int = 20,
        num_read_heads: int = 1,
        num_write_heads: int = 1,
        shift_range: int = 1,
        output_units: int | None = None,
        clip_value: float | None = 20.0,
        memory_initial_value: float = 1e-6,
        return_sequences: bool = True,
        **kwargs,
    ):
        cell_kwargs = {
            "controller_units": controller_units,
            "memory_size": memory_size,
            "memory_width": memory_width,
            "num_read_heads": num_read_heads,
            "num_write_heads": num_write_heads,
            "shift_range": shift_range,
            "output_units": output_units,
            "clip_value": clip_value,
            "memory_initial_value": memory_initial_value,
        }
        super().__init__(cell_kwargs, return_sequences=return_sequences, **kwargs)

    controller_units = cell_argument("controller_units")
    memory_size = cell_argument("memory_size")
    memory_width = cell_argument("memory_width")
    num_read_heads = cell_argument("num_read_heads")
    num_write_heads = cell_argument("num_write_heads")
    shift_range = cell_argument("shift_range")
    output_units = cell_argument("output_units")
    clip_value = cell_argument("clip_value")
    memory_initial_value = cell_argument("memory_initial_value")
