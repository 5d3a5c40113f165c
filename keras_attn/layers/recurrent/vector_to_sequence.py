"""A recurrent decoder that generates a sequence from one vector."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import check_choice
from keras_attn.layers.recurrent._output_feedback import OutputFeedbackDecoder
from keras_attn.layers.recurrent.elman_rnn_cell import ElmanRNNCell

_CONDITIONINGS = ("every_step", "initial_state", "both")


@keras_attn_export("keras_attn.layers.VectorToSequence")
class VectorToSequence(OutputFeedbackDecoder):
    """Sequence generator conditioned on one vector `v` (e.g. image captioning).

    For `v` `(batch, d_v)` and outputs `o^(1..T)` `(batch, T, q)`, with `f^(0) = 0`:

        h^(0) = activation(v W_0 + b_0)   if conditioning in {"initial_state", "both"}, else 0
        h^(t) = activation(f^(t-1) W_f + h^(t-1) W_h + v R + b)   (batch, units)
        o^(t) = output_activation(h^(t) W_out + b_out)            (batch, q)
        f^(t) = y^(t)  (teacher forcing, training)  or  pred(o^(t))  (free running, inference)

    `conditioning="every_step"`: `v` reaches every step through the `v R` term (Goodfellow et
    al.'s `x^T R`, section 10.2.4); `"initial_state"` drops `v R` and only sets `h^(0)`
    (Show and Tell style); `"both"` does both. The step is an `ElmanRNNCell` (`layer.cell`)
    reading `[f^(t-1); v]`, so its `kernel` stacks `W_f` (first `q` rows) over `R`; the
    Dense layer `initial_state_layer` holds `W_0, b_0`.

    `pred(o) = one_hot(argmax(o))` for `feedback="categorical"` (targets are ids `(batch, T)`,
    greedy generation) and `pred(o) = o` for `"continuous"` (targets `(batch, T, q)`). In
    training the targets are fed back (teacher forcing), with scheduled sampling as in
    `TeacherForcedRNN` (`schedule`, `sampling_probability`, `decay`, `step=`).

    Length: the targets' `T` when targets are given, else `length`. At inference the targets'
    values are never read (free-running greedy generation).

    Args:
        units: size of the hidden state.
        output_units: size `q` of the outputs (vocabulary size for categorical feedback).
        length: number of steps generated when no targets are given.
        conditioning: `"every_step"`, `"initial_state"` or `"both"`.
        activation: hidden activation (also of `h^(0)`).
        output_activation: output activation (None: logits / linear outputs).
        feedback: `"categorical"` or `"continuous"`.
        schedule, sampling_probability, decay, seed: scheduled sampling, as in
            `TeacherForcedRNN` (default: pure teacher forcing).

    Call arguments:
        inputs: `v` `(batch, d_v)`.
        targets: ids `(batch, T)` or vectors `(batch, T, q)`; fed back in training.
        targets_mask: bool `(batch, T)`; padded steps keep the state and output zeros. Filled from
            the targets' Keras mask.
        step: training step for a decaying schedule.
        sampling_probability: `p` for this call, overriding the schedule.
        training: teacher forcing when True and targets are given.

    Returns:
        `o^(1..T)` `(batch, T, q)`.

    Example:

    >>> import numpy as np
    >>> decoder = VectorToSequence(8, output_units=10, length=4)
    >>> v = np.ones((2, 5), "float32")
    >>> tuple(decoder(v).shape)
    (2, 4, 10)
    >>> tuple(decoder(v, np.ones((2, 6), "int32"), training=True).shape)
    (2, 6, 10)

    References:
        Vinyals, Toshev, Bengio and Erhan, 2015, "Show and Tell: A Neural Image Caption
        Generator", arXiv:1411.4555; Goodfellow, Bengio and Courville, 2016, "Deep Learning",
        section 10.2.4.
    """

    cell_class = ElmanRNNCell

    def __init__(
        self,
        units: int,
        output_units: int,
        length: int | None = None,
        conditioning: str = "every_step",
        activation="tanh",
        output_activation=None,
        feedback: str = "categorical",
        schedule: str = "constant",
        sampling_probability: float | None = None,
        decay: float | None = None,
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(
            units=units,
            output_units=output_units,
            feedback=feedback,
            activation=activation,
            output_activation=output_activation,
            schedule=schedule,
            sampling_probability=sampling_probability,
            decay=decay,
            seed=seed,
            **kwargs,
        )
        if length is not None and (not isinstance(length, int) or length <= 0):
            raise ValueError(
                f"Expected length to be None or a positive integer. Received: length={length!r}"
            )
        check_choice("conditioning", conditioning, _CONDITIONINGS)
        self.length = length
        self.conditioning = conditioning

    @property
    def _every_step(self) -> bool:
        return self.conditioning in ("every_step", "both")

    @property
    def _initial_state(self) -> bool:
        return self.conditioning in ("initial_state", "both")

    def build(self, inputs_shape):
        vector_size = inputs_shape[-1]
        self.build_cell(
            inputs_shape[0], self.output_units + (vector_size if self._every_step else 0)
        )
        if self._initial_state:
            self.initial_state_layer = keras.layers.Dense(
                self.units,
                activation=self.activation,
                dtype=self.dtype_policy,
                name="initial_state",
            )
            self.initial_state_layer.build(inputs_shape)
        self.built = True

    def _step(self, inputs_t, feedback, states, training):
        vector, hidden = states
        cell_inputs = ops.concatenate([feedback, vector], -1) if self._every_step else feedback
        output, (hidden,) = self.cell(cell_inputs, [hidden])
        return output, [vector, hidden]

    def call(
        self,
        inputs,
        targets=None,
        targets_mask=None,
        step=None,
        sampling_probability=None,
        training=None,
    ):
        vector = ops.cast(inputs, self.compute_dtype)
        batch_size = ops.shape(vector)[0]
        if targets is not None:
            length = ops.shape(targets)[1]
        elif self.length is not None:
            length = self.length
        else:
            raise ValueError(
                "VectorToSequence needs targets or a constructor length to know how many steps "
                "to generate. Received: targets=None, length=None"
            )
        if self._initial_state:
            hidden = self.initial_state_layer(vector)
        else:
            hidden = ops.zeros((batch_size, self.units), dtype=self.compute_dtype)
        # The vector rides along as a constant state so the step function stays pure.
        return self._decode(
            batch_size=batch_size,
            length=length,
            states=[vector, hidden],
            targets=targets,
            mask=targets_mask,
            step=step,
            sampling_probability=sampling_probability,
            training=training,
        )

    def compute_output_shape(self, inputs_shape, targets_shape=None):
        length = self.length if targets_shape is None else targets_shape[1]
        return (inputs_shape[0], length, self.output_units)

    def get_config(self):
        config = super().get_config()
        config.update(length=self.length, conditioning=self.conditioning)
        return config
