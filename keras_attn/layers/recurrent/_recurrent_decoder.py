"""The base of the recurrent decoders: cell choice, layer stack, initial state and the step loop."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn import distributions, scores
from keras_attn.api_export import keras_attn_export
from keras_attn.layers.mask_passthrough import FirstInputMaskPassthrough
from keras_attn.layers.recurrent._gru_form import check_gru_form, gru_form_kwargs
from keras_attn.ops.masking import apply_query_mask

CELLS = {"lstm": keras.layers.LSTMCell, "gru": keras.layers.GRUCell}
RNNS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}


class RecurrentDecoder(FirstInputMaskPassthrough, keras.layers.Layer):
    """Base of a decoder whose state `s^(t)` is the state of a stack of LSTM or GRU cells.

    It validates `units`, `cell` and the depth, builds the recurrent layers, checks and
    zero-fills the initial state, and runs one step of the stack. A subclass defines what enters
    the bottom cell at each step and what it outputs (`step`).

    With `num_layers = L > 1` the cells form a stack (Sutskever et al., 2014; Luong et al.,
    2015; Wu et al., 2016). Layer 1 reads the subclass's cell input `x^(t)`; layer `l > 1` reads
    the output of layer `l - 1`:

        a_1^(t) = f_1(s_1^(t-1), x^(t))                              (batch, units)
        a_l^(t) = f_l(s_l^(t-1), dropout(h_{l-1}^(t)))               (batch, units)
        h_l^(t) = a_l^(t) + h_{l-1}^(t)   for l >= 3 (residual, Wu et al. section 3.1)
        h_l^(t) = a_l^(t)                 for l <= 2

    and `s^(t) = h_L^(t)`, the top layer's output, is what the subclass attends from and reads
    out. The state is every layer's cell state, bottom layer first: `[h_1, c_1, ..., h_L, c_L]`
    for an LSTM, `[h_1, ..., h_L]` for a GRU.

    Args:
        units: state size of every layer.
        cell: `"lstm"` or `"gru"`; each layer's state is `[h, c]` or `[h]`, each
            `(batch, units)`.
        reset_after: the GRU's form (`cell="gru"` only). True (the default, Keras' and cuDNN's):
            `h~ = tanh(x W_h + b_h + r ⊙ (h^(t-1) U_h + b'_h))`, the fused cuDNN kernel on a
            GPU. False: Cho et al.'s equations, `h~ = tanh(x W_h + (r ⊙ h^(t-1)) U_h + b_h)`,
            with no cuDNN kernel (the generic loop on every device). False with an LSTM is a
            `ValueError`.
        num_layers: `L`, the number of stacked recurrent layers (default 1).
        layer_dropout: dropout rate on the output of each layer passed to the next one (only
            with `num_layers > 1`; training only).
    """

    def __init__(
        self,
        units: int,
        cell: str = "lstm",
        reset_after: bool = True,
        num_layers: int = 1,
        layer_dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
            raise ValueError(f"Expected units to be a positive integer. Received: units={units!r}")
        if cell not in CELLS:
            raise ValueError(f"Expected cell in {sorted(CELLS)}. Received: cell={cell!r}")
        self.units = units
        self.cell = cell
        self.reset_after = check_gru_form(cell, reset_after)
        self.num_layers = check_num_layers(num_layers)
        self.layer_dropout = check_layer_dropout(layer_dropout)
        self.num_cell_states = 2 if cell == "lstm" else 1
        # The states of the whole stack, `num_cell_states` per layer, bottom layer first.
        self.num_initial_states = self.num_layers * self.num_cell_states
        self.supports_masking = True

    def build_rnn(self, batch_size, input_size: int) -> keras.layers.RNN:
        """A built `keras.layers.LSTM`/`GRU` named `"rnn"` over inputs `(batch, T, input_size)`.

        It returns the whole sequence and the final states; a teacher-forced pass runs it over
        all steps at once (cuDNN-eligible on a GPU), and `run_cell` steps its cell.
        """
        rnn = RNNS[self.cell](
            self.units,
            return_sequences=True,
            return_state=True,
            **gru_form_kwargs(self.cell, self.reset_after),
            dtype=self.dtype_policy,
            name="rnn",
        )
        rnn.build((batch_size, None, input_size))
        return rnn

    def build_upper_layers(self, batch_size) -> None:
        """Build layers `2..num_layers` of the stack (nothing for one layer).

        Each is a Keras `LSTM`/`GRU` named `"rnn_<l>"` over inputs `(batch, T, units)`, with a
        `Dropout` named `"dropout_<l>"` on its input. A teacher-forced pass runs them over all
        steps (`run_stack`); `step_stack` steps their cells.
        """
        if self.num_layers == 1:
            return
        self.upper_rnns = []
        self.layer_dropouts = []
        for layer in range(2, self.num_layers + 1):
            rnn = RNNS[self.cell](
                self.units,
                return_sequences=True,
                return_state=True,
                **gru_form_kwargs(self.cell, self.reset_after),
                dtype=self.dtype_policy,
                name=f"rnn_{layer}",
            )
            rnn.build((batch_size, None, self.units))
            dropout = keras.layers.Dropout(
                self.layer_dropout, dtype=self.dtype_policy, name=f"dropout_{layer}"
            )
            self.upper_rnns.append(rnn)
            self.layer_dropouts.append(dropout)

    def top_state(self, states: list):
        """The top layer's `h` `(batch, units)` among the stack's states `[h_1, (c_1,) ...]`."""
        return states[self.num_initial_states - self.num_cell_states]

    def layer_dropout_masks(self, batch_size, length, training=None) -> list | None:
        """The dropout between the layers of `length` steps, drawn at once: one mask
        `(length, batch, units)` per layer `2..num_layers` (0 or `1 / (1 - layer_dropout)`), or
        None when there is nothing to drop. A loop over the steps draws them before it starts
        and gives `step_stack` each step's slice: a random draw inside `keras.ops.scan` would
        update a seed generator from inside the loop (a leaked tracer under JAX).
        """
        if not training or self.num_layers == 1 or not self.layer_dropout:
            return None
        ones = ops.ones((length, batch_size, self.units), dtype=self.compute_dtype)
        return [dropout(ones, training=training) for dropout in self.layer_dropouts]

    def step_stack(
        self, bottom_cell, cell_inputs, states: list, training=None, dropout_masks=None
    ) -> tuple:
        """One step of the stack: `(h_L^(t) (batch, units), new states of every layer)`.

        `bottom_cell` is layer 1's cell and `cell_inputs` its input `(batch, d_x)`; `states` the
        stack's states, bottom layer first (`num_initial_states` tensors). `dropout_masks`, this
        step's slices of `layer_dropout_masks` (`(batch, units)` each), replace the dropout
        layers' own draws.
        """
        count = self.num_cell_states
        output, new_states = self.run_cell(bottom_cell, cell_inputs, states[:count], training)
        for index in range(1, self.num_layers):
            if dropout_masks is None:
                layer_inputs = self.layer_dropouts[index - 1](output, training=training)
            else:
                layer_inputs = output * dropout_masks[index - 1]
            layer_states = states[index * count : (index + 1) * count]
            layer_output, layer_states = self.run_cell(
                self.upper_rnns[index - 1].cell, layer_inputs, layer_states, training
            )
            output = layer_output + output if index >= 2 else layer_output
            new_states.extend(layer_states)
        return output, new_states

    def run_stack(self, bottom_rnn, inputs, initial_state: list, training=None):
        """The stack over a whole teacher-forced sequence: `h_L^(1..T)` `(batch, T, units)`.

        `bottom_rnn` is layer 1's Keras RNN and `inputs` its inputs `(batch, T, d_x)`; each layer
        runs as one Keras RNN pass (cuDNN-eligible on a GPU). The final states are not returned.
        """
        count = self.num_cell_states
        sequence, *_ = bottom_rnn(inputs, initial_state=initial_state[:count], training=training)
        for index in range(1, self.num_layers):
            layer_inputs = self.layer_dropouts[index - 1](sequence, training=training)
            layer_sequence, *_ = self.upper_rnns[index - 1](
                layer_inputs,
                initial_state=initial_state[index * count : (index + 1) * count],
                training=training,
            )
            sequence = layer_sequence + sequence if index >= 2 else layer_sequence
        return sequence

    @staticmethod
    def run_cell(cell: keras.layers.Layer, cell_inputs, states: list, training=None) -> tuple:
        """One cell step: `(s^(t) (batch, units), new cell states as a list)`."""
        state_t, new_states = cell(cell_inputs, list(states), training=training)
        if not isinstance(new_states, (list, tuple)):
            new_states = [new_states]
        return state_t, list(new_states)

    def initial_step_states(self, initial_state: list) -> list:
        """The states `step` carries, from the cell's initial state `[h, c]` or `[h]`.

        Here the cell's state itself, cast to the compute dtype; a decoder that carries more
        (a fed-back output, a step index) appends it.
        """
        return [ops.cast(state, self.compute_dtype) for state in initial_state]

    def _zero_cell_state(self, batch_size) -> list:
        """`[(batch, units)] * num_initial_states` zeros in the compute dtype."""
        return [
            ops.zeros((batch_size, self.units), dtype=self.compute_dtype)
            for _ in range(self.num_initial_states)
        ]

    def get_initial_state(self, batch_size) -> list:
        """`initial_step_states` of a zero cell state: what `step` takes first."""
        return self.initial_step_states(self._zero_cell_state(batch_size))

    def check_initial_state(self, initial_state, batch_size) -> list:
        """The cell's initial state in the compute dtype: zeros when None, else checked."""
        if initial_state is None:
            return self._zero_cell_state(batch_size)
        if len(initial_state) != self.num_initial_states:
            layers = f" of {self.num_layers} layers" if self.num_layers > 1 else ""
            raise ValueError(
                f"A {self.cell} decoder{layers} takes {self.num_initial_states} initial state "
                f"tensor(s). Received: {len(initial_state)}"
            )
        return [ops.cast(state, self.compute_dtype) for state in initial_state]

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(units=self.units, cell=self.cell, reset_after=self.reset_after)
        # A one-layer decoder keeps the config it has always had; configs without these keys
        # load as one layer.
        if self.num_layers != 1:
            config["num_layers"] = self.num_layers
        if self.layer_dropout:
            config["layer_dropout"] = self.layer_dropout
        return config


def check_num_layers(num_layers) -> int:
    """`num_layers`, checked to be a positive integer."""
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers <= 0:
        raise ValueError(
            f"Expected num_layers to be a positive integer. Received: num_layers={num_layers!r}"
        )
    return num_layers


def check_layer_dropout(layer_dropout) -> float:
    """`layer_dropout` as a float, checked to be a rate in [0, 1)."""
    if (
        isinstance(layer_dropout, bool)
        or not isinstance(layer_dropout, (int, float))
        or not 0.0 <= layer_dropout < 1.0
    ):
        raise ValueError(
            "Expected layer_dropout to be a rate in [0, 1). "
            f"Received: layer_dropout={layer_dropout!r}"
        )
    return float(layer_dropout)


@keras_attn_export("keras_attn.layers.AttentionDecoder")
class AttentionDecoder(RecurrentDecoder):
    """Base of a recurrent decoder that attends to an encoder memory at every step.

    `BahdanauDecoder` and `LuongDecoder` subclass it. A subclass provides
    `prepare_memory(memory)` (the key-only work, done once per source),
    `output_size(inputs_size, memory_size)` (`d_o`) and
    `step(inputs_t, states, memory, prepared_memory, memory_mask=None, training=None)`, which
    returns `(output_t (batch, d_o), alignment_t (batch, T_x), new_states)`. Training runs
    `step` over the teacher-forced inputs (`run_steps`; a subclass whose states do not depend on
    the attention may override `decode` with a faster pass); inference calls `step` once per
    generated token, so both compute the same function. The attention itself is best an
    attention layer's step-wise API (`BaseAttention.prepare_keys` and `attention_weights`).

    Args:
        units: decoder state size.
        cell: `"lstm"` or `"gru"`; the cell's state is `[h, c]` or `[h]`, each `(batch, units)`.
        reset_after: the GRU's form, as in `RecurrentDecoder`: True (default) Keras' and cuDNN's,
            False Cho et al.'s equations.
        num_layers, layer_dropout: the depth of the recurrent stack and the dropout between its
            layers, as in `RecurrentDecoder` (a subclass steps the stack with `step_stack`).

    Call arguments:
        inputs: embedded previous target tokens `(batch, T_y, d_y)`.
        memory: encoder outputs `(batch, T_x, d_m)`.
        memory_mask: bool `(batch, T_x)`; padded source positions get exactly zero weight.
            Filled from Keras masking when not given.
        initial_state: the stack's initial state, a list of `(batch, units)` tensors (`[h, c]`
            per LSTM layer, `[h]` per GRU layer, bottom layer first); zeros when omitted.
        inputs_mask: bool `(batch, T_y)`; outputs at padded target steps are zeroed.
        return_attention_scores: also return the alignments.
        training: passed to the cell.

    Returns:
        `outputs` `(batch, T_y, d_o)`, or `(outputs, alignments)` with alignments
        `(batch, T_y, T_x)` when `return_attention_scores=True`.

    Example: a decoder that attends from `s^(t-1)` with a dot score, feeds `[y^(t-1); c^(t)]` to
    the cell and outputs `s^(t)`.

    >>> import numpy as np
    >>> from keras_attn.layers import Attention
    >>> class DotDecoder(AttentionDecoder):
    ...     def build(self, inputs_shape, memory_shape):
    ...         self.align = Attention(score="dot")
    ...         self.align.build((inputs_shape[0], 1, self.units), memory_shape)
    ...         self.rnn = self.build_rnn(inputs_shape[0], inputs_shape[-1] + memory_shape[-1])
    ...     def output_size(self, inputs_size, memory_size):
    ...         return self.units
    ...     def prepare_memory(self, memory):
    ...         return self.align.prepare_keys(memory)
    ...     def step(self, inputs_t, states, memory, prepared_memory, memory_mask=None,
    ...              training=None):
    ...         query = ops.expand_dims(states[0], 1)  # s^(t-1): (batch, 1, units)
    ...         weights = self.align.attention_weights(query, prepared_memory, memory_mask)
    ...         context = ops.einsum("bqk,bkd->bd", weights, memory)  # c^(t): (batch, d_m)
    ...         cell_inputs = ops.concatenate([inputs_t, context], axis=-1)
    ...         state_t, states = self.run_cell(self.rnn.cell, cell_inputs, states, training)
    ...         return state_t, weights[:, 0], states
    >>> y = np.zeros((2, 4, 3), "float32"); memory = np.ones((2, 6, 8), "float32")
    >>> outputs, alignments = DotDecoder(8)(y, memory, return_attention_scores=True)
    >>> tuple(outputs.shape), np.round(np.asarray(alignments[0, 0], "float64"), 3).tolist()
    ((2, 4, 8), [0.167, 0.167, 0.167, 0.167, 0.167, 0.167])
    """

    def score_and_distribution(self, score, distribution, attention_units):
        """The score and distribution objects that `score` and `distribution` (names or objects)
        stand for, in the decoder's dtype policy; `attention_units` sizes an additive or concat
        score."""
        score_kwargs = {"dtype": self.dtype_policy}
        if score in ("additive", "concat"):
            score_kwargs["units"] = attention_units
        score_fn = scores.get(score, **score_kwargs)
        return score_fn, distributions.get(distribution, dtype=self.dtype_policy)

    def decode(self, inputs, memory, memory_mask, initial_state: list, training=None) -> tuple:
        """Outputs `(batch, T_y, d_o)` and alignments `(batch, T_y, T_x)`: `run_steps`."""
        return self.run_steps(inputs, memory, memory_mask, initial_state, training)

    def run_steps(self, inputs, memory, memory_mask, initial_state: list, training=None) -> tuple:
        """`step` over every target position: outputs `(batch, T_y, d_o)`, alignments.

        `initial_state` is the cell's state; the alignments are `(batch, T_y, T_x)`.
        """
        prepared_memory = self.prepare_memory(memory)
        batch_size = ops.shape(inputs)[0]
        output_size = self.output_size(inputs.shape[-1], memory.shape[-1])
        initial_output = ops.zeros((batch_size, output_size), dtype=self.compute_dtype)
        initial_alignment = ops.zeros((batch_size, ops.shape(memory)[1]), dtype=self.compute_dtype)

        sequence = ops.transpose(inputs, (1, 0, 2))  # (batch, T_y, d_y) -> (T_y, batch, d_y)
        dropout_masks = self.layer_dropout_masks(batch_size, ops.shape(inputs)[1], training)
        width, inputs_dtype = inputs.shape[-1], sequence.dtype
        if dropout_masks:
            # The masks ride in the scanned tensor, after each step's inputs (float32, which
            # holds float16 and bfloat16 values exactly): Keras' TensorFlow scan fails on several
            # scanned tensors of unknown length.
            sequence = ops.concatenate(
                [ops.cast(x, "float32") for x in (sequence, *dropout_masks)], axis=-1
            )

        def body(carry, sequences_t):
            inputs_t, step_kwargs = sequences_t, {}
            if dropout_masks:  # (batch, d_y + (L - 1) units) -> inputs, one mask per layer
                inputs_t = ops.cast(sequences_t[:, :width], inputs_dtype)
                step_kwargs["dropout_masks"] = [
                    ops.cast(sequences_t[:, start : start + self.units], self.compute_dtype)
                    for start in range(width, width + len(dropout_masks) * self.units, self.units)
                ]
            output, alignment, new_states = self.step(
                inputs_t, carry[0], memory, prepared_memory, memory_mask, training, **step_kwargs
            )
            new_carry = (new_states, output, ops.cast(alignment, self.compute_dtype))
            return new_carry, new_carry

        # keras.ops.scan stacks the carry, so it holds the step's output and alignment too.
        # Time-major: outputs (T_y, batch, d_o), alignments (T_y, batch, T_x)
        _, (_, outputs, alignments) = ops.scan(
            body,
            (self.initial_step_states(initial_state), initial_output, initial_alignment),
            sequence,
        )
        return ops.transpose(outputs, (1, 0, 2)), ops.transpose(alignments, (1, 0, 2))

    def call(
        self,
        inputs,
        memory,
        memory_mask=None,
        initial_state=None,
        inputs_mask=None,
        return_attention_scores=False,
        training=None,
    ):
        initial_state = self.check_initial_state(initial_state, ops.shape(inputs)[0])
        outputs, alignments = self.decode(inputs, memory, memory_mask, initial_state, training)
        outputs = apply_query_mask(outputs, inputs_mask)
        if return_attention_scores:
            return outputs, alignments
        return outputs
