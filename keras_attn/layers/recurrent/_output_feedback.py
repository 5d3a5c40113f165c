"""Output-feedback decoding shared by `TeacherForcedRNN` and `VectorToSequence` (not public).

A decoder whose step reads the previous output: in training the ground truth `y^(t-1)` is fed
(teacher forcing), or with scheduled sampling the model's own prediction with probability `p`;
at inference (or without targets) always its own prediction (free running). Subclasses provide
the step (`_step`); this base holds the cell, runs the loop, the coin flips and the schedules
of `p`.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.errors import ConfigError
from keras_attn.layers._arguments import check_choice, serialize_arguments
from keras_attn.layers.recurrent._optional_activation import get_optional_activation
from keras_attn.ops import sampling_schedules

FEEDBACKS = ("continuous", "categorical")
SCHEDULES = ("constant", *sampling_schedules.SCHEDULES)
# The spelling `"inverse_sigmoid"` of layers saved before the schedules were shared with
# `keras-attn train`: still accepted (and kept as given in the config).
_SPELLINGS = {"inverse_sigmoid": "inverse-sigmoid"}


class OutputFeedbackDecoder(keras.layers.Layer):
    """Base layer: the feedback loop, teacher forcing and scheduled sampling.

    Scheduled sampling (Bengio et al., 2015, arXiv:1506.03099): at every step of every sequence
    in training a coin decides what is fed at the next step: the model's own prediction with
    probability `p`, the ground truth `y^(t-1)` with probability `1 - p` (the paper's
    `epsilon_i = 1 - p`). `p` depends on the training step `i` through `schedule`:

        constant:         p_i = sampling_probability                        (default 0)
        linear:           p_i = min(cap, decay * i)                   paper: max(eps, k - c i)
        exponential:      p_i = min(cap, 1 - decay ** i)              paper: eps_i = k^i
        inverse-sigmoid:  p_i = min(cap, 1 - decay / (decay + exp(i / decay)))
                                                          paper: eps_i = k / (k + exp(i / k))

    where `cap = sampling_probability` (default 1 for the decaying schedules): the schedules of
    `keras_attn.ops.sampling_schedules` with `epsilon_i = 1 - p_i` and floor `1 - cap`.

    Subclasses set `cell_class` (`ElmanRNNCell` or a subclass; `build_cell` makes it from
    `units`, `output_units` and the activations) and define
    `_step(inputs_t, feedback, states, training) -> (output, new_states)`: one step from the step
    input (None when there is none), the fed-back `f^(t-1)` `(batch, q)` and their own states,
    called by `_decode`.
    """

    cell_class: type

    def __init__(
        self,
        units: int,
        output_units: int,
        feedback: str,
        activation="tanh",
        output_activation=None,
        schedule: str = "constant",
        sampling_probability: float | None = None,
        decay: float | None = None,
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(f"Expected units to be a positive integer. Received: units={units!r}")
        if not isinstance(output_units, int) or output_units <= 0:
            raise ValueError(
                "Expected output_units to be a positive integer. "
                f"Received: output_units={output_units!r}"
            )
        check_choice("feedback", feedback, FEEDBACKS)
        _check_schedule(schedule, decay)
        if sampling_probability is not None and not 0.0 <= sampling_probability <= 1.0:
            raise ValueError(
                "Expected sampling_probability in [0, 1]. "
                f"Received: sampling_probability={sampling_probability!r}"
            )
        self.units = units
        self.output_units = output_units
        self.feedback = feedback
        self.activation = keras.activations.get(activation)
        self.output_activation = get_optional_activation(output_activation)
        self.schedule = schedule
        self.sampling_probability = sampling_probability
        self.decay = decay
        self.seed = seed
        default_cap = 0.0 if schedule == "constant" else 1.0
        self._max_probability = (
            default_cap if sampling_probability is None else float(sampling_probability)
        )
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build_cell(self, batch_size, input_size: int) -> None:
        """Create and build `self.cell`, named `"cell"`, over step inputs `(batch, input_size)`."""
        self.cell = self.cell_class(
            self.units,
            output_units=self.output_units,
            activation=self.activation,
            output_activation=self.output_activation,
            dtype=self.dtype_policy,
            name="cell",
        )
        self.cell.build((batch_size, input_size))

    def sampling_probability_at(self, step):
        """`p_i`, the probability of feeding the model's own prediction at training step `i`.

        Args:
            step: the training step `i` (int or scalar tensor, e.g. `optimizer.iterations`).

        Returns:
            A float32 scalar tensor in `[0, sampling_probability]`.
        """
        if self.schedule == "constant":
            return ops.convert_to_tensor(self._max_probability, "float32")
        epsilon = sampling_schedules.teacher_forcing_probability(
            _SPELLINGS.get(self.schedule, self.schedule),
            step,
            self.decay,
            floor=1.0 - self._max_probability,
            dtype="float32",
        )
        return 1.0 - epsilon

    def _feeding_probability(self, step, sampling_probability):
        """The `p` of this training call: given, from the step, or the constant schedule's."""
        if sampling_probability is not None:
            return ops.cast(sampling_probability, "float32")
        if step is not None:
            return self.sampling_probability_at(step)
        if self.schedule != "constant":
            raise ValueError(
                f"schedule={self.schedule!r} needs the training step: call the layer with "
                "step=… (e.g. optimizer.iterations) or sampling_probability=… in training."
            )
        return ops.convert_to_tensor(self._max_probability, "float32")

    def _as_feedback(self, targets):
        """Targets as the vectors fed back: one-hot ids, or the continuous values themselves."""
        if self.feedback == "categorical":
            return ops.one_hot(
                ops.cast(targets, "int32"), self.output_units, dtype=self.compute_dtype
            )
        return ops.cast(targets, self.compute_dtype)

    def _own_feedback(self, output):
        """What the model feeds itself: its output, or the one-hot of its argmax (greedy)."""
        if self.feedback == "categorical":
            return ops.one_hot(ops.argmax(output, axis=-1), self.output_units, dtype=output.dtype)
        return output

    def _decode(
        self,
        batch_size,
        length,
        states,
        targets=None,
        mask=None,
        step_inputs=None,
        step=None,
        sampling_probability=None,
        training=None,
    ):
        """Run the loop for `length` steps; returns the outputs `(batch, length, output_units)`.

        `states` are the subclass' initial states; `step_inputs` `(batch, length, d)` or None.
        Teacher forcing (with scheduled sampling) when `training` and `targets` are given, free
        running otherwise. Padded steps (`mask` False) keep every state and the fed-back value
        and output zeros.
        """
        feedback_shape = (length, batch_size, self.output_units)
        if training and targets is not None:
            probability = self._feeding_probability(step, sampling_probability)
            # One coin per (step, sequence), drawn before the loop: True = feed own prediction.
            coins = keras.random.uniform((length, batch_size), seed=self.seed_generator)
            use_own = ops.less(coins, probability)
            # (batch, T, q) -> (T, batch, q)
            fed_targets = ops.transpose(self._as_feedback(targets), (1, 0, 2))
        else:
            use_own = ops.ones((length, batch_size), dtype="bool")
            fed_targets = ops.zeros(feedback_shape, dtype=self.compute_dtype)
        if mask is None:
            keep = ops.ones((length, batch_size), dtype="bool")
        else:
            keep = ops.transpose(ops.cast(mask, "bool"), (1, 0))  # (T, batch)
        sequences = (fed_targets, use_own, keep)
        if step_inputs is not None:
            sequences += (ops.transpose(ops.cast(step_inputs, self.compute_dtype), (1, 0, 2)),)

        def body(carry, sequences_t):
            feedback, _, *states = carry
            target_t, use_own_t, keep_t = sequences_t[:3]
            inputs_t = sequences_t[3] if len(sequences_t) > 3 else None
            output, new_states = self._step(inputs_t, feedback, states, training)
            next_feedback = ops.where(use_own_t[:, None], self._own_feedback(output), target_t)
            keep_t = keep_t[:, None]
            next_feedback = ops.where(keep_t, next_feedback, feedback)
            new_states = [
                ops.where(keep_t, new, old) for new, old in zip(new_states, states, strict=True)
            ]
            output = ops.where(keep_t, output, ops.zeros_like(output))
            new_carry = [next_feedback, output, *new_states]
            return new_carry, new_carry

        # y^(0) = 0: nothing has been generated before the first step. keras.ops.scan (TF
        # backend) stacks values shaped like the carry, so the carry also holds the step's output.
        start = ops.zeros((batch_size, self.output_units), dtype=self.compute_dtype)
        carry = [start, start, *[ops.cast(state, self.compute_dtype) for state in states]]
        _, stacked = ops.scan(body, carry, sequences)
        return ops.transpose(stacked[1], (1, 0, 2))  # (T, batch, q) -> (batch, T, q)

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self,
                "output_units",
                "feedback",
                "schedule",
                "sampling_probability",
                "decay",
                "seed",
                "units",
                "activation",
                "output_activation",
            )
        )
        return config


def _check_schedule(schedule: str, decay: float | None) -> None:
    """Raise a `ConfigError` naming `schedule` or `decay` unless the pair is usable."""
    if schedule == "constant":
        if decay is not None:
            raise ConfigError(
                f"schedule='constant' takes no decay. Received: decay={decay!r}",
                ["schedule", "decay"],
            )
        return
    name = _SPELLINGS.get(schedule, schedule)
    if name in sampling_schedules.SCHEDULES and decay is None:
        raise ConfigError(
            f"schedule={schedule!r} needs a decay. Received: decay=None", ["schedule", "decay"]
        )
    sampling_schedules.check_schedule(
        name, decay, schedule_name="schedule", constant_name="decay", choices=SCHEDULES
    )
