"""Scheduled sampling (Bengio et al., 2015, arXiv:1506.03099) for the RNN translators.

Teacher forcing feeds the decoder the gold previous token `y_{t-1}` at every step; at inference
the decoder reads its own previous prediction, a distribution it never saw in training (exposure
bias). Scheduled sampling flips a coin for every target token of training step `i`: with
probability `epsilon_i` the decoder's input is the gold previous token, otherwise a token
sampled from the model's own output distribution of the previous step. `epsilon_i` decays over
training by one of the three schedules of section 2.4, from (nearly) full teacher forcing
towards the model's own samples:

    linear:          epsilon_i = max(floor, 1 - c · i)      (offset k = 1, slope c)
    exponential:     epsilon_i = k^i                        (0 < k < 1)
    inverse-sigmoid: epsilon_i = k / (k + exp(i / k))       (k >= 1)

`i` is the number of training steps done before the current one (the schedules are
`keras_attn.ops.sampling_schedules`'). The decoder is the family's step view with
`training=True`, so dropout is applied as in the teacher-forced pass. The sampled tokens are drawn
from `softmax(logits)` (as Bengio et al. sample, not the argmax) and are not differentiated
through: the gradient flows through each step's logits and the recurrent states, not through
the choice of the next input. Every random number is a stateless function of the run's seed,
the step and the decoder position, so a resumed run draws what the uninterrupted run drew.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_attn.errors import ConfigError
from keras_attn.models.families import ModelFamily
from keras_attn.models.rnn.steps import RNNTranslatorSteps
from keras_attn.ops import sampling_schedules
from keras_attn.ops.sampling_schedules import DEFAULT_CONSTANTS, SCHEDULES

__all__ = [
    "DEFAULT_CONSTANTS",
    "SCHEDULES",
    "ScheduledSampling",
    "check_schedule",
    "sampling_epsilon",
    "supports_scheduled_sampling",
    "training_steps",
]


def check_schedule(schedule: str, constant: float | None, floor: float | None) -> None:
    """Raise a `ConfigError` naming the argument if `(schedule, constant, floor)` is not usable.

    `constant` None stands for `DEFAULT_CONSTANTS[schedule]`; `floor` applies to `linear` only.
    The schedules and their constants are `keras_attn.ops.sampling_schedules`'.
    """
    sampling_schedules.check_schedule(
        schedule, constant, schedule_name="scheduled_sampling", constant_name="sampling_constant"
    )
    if floor is not None:
        if schedule != "linear":
            raise ConfigError(
                f"sampling_floor applies to scheduled_sampling='linear' only. Received: "
                f"scheduled_sampling={schedule!r}",
                ["sampling_floor", "scheduled_sampling"],
            )
        if not 0.0 <= floor < 1.0:
            raise ConfigError(
                f"Expected sampling_floor in [0, 1). Received: {floor}", ["sampling_floor"]
            )


def sampling_epsilon(
    schedule: str, step, constant: float | None = None, floor: float | None = None
) -> tf.Tensor:
    """`epsilon_i`, the probability of feeding the gold previous token at training step `i`:
    `keras_attn.ops.sampling_schedules.teacher_forcing_probability` in float64, its arguments
    checked first.

    Args:
        schedule: `"linear"`, `"exponential"` or `"inverse-sigmoid"` (see the module docstring).
        step: `i`, the training steps done before this one (an int or an integer tensor).
        constant: the schedule's constant: the slope `c` (linear), the base `k` (exponential) or
            `k` (inverse sigmoid); None: `DEFAULT_CONSTANTS[schedule]`.
        floor: linear only, the minimum `epsilon` (default 0).

    Raises:
        ConfigError: as `check_schedule`.
    """
    check_schedule(schedule, constant, floor)
    return sampling_schedules.teacher_forcing_probability(
        schedule, step, constant, floor or 0.0, dtype="float64"
    )


def training_steps(model: keras.Model, family: ModelFamily) -> RNNTranslatorSteps:
    """The family's step view of `model` in training mode (`training=True`).

    Stepping it over the gold target reproduces the teacher-forced training pass
    `model(..., training=True)`, the model's dropout layers included (with the same dropout
    masks when the rates are 0, and masks of the same distribution otherwise).

    Raises:
        ConfigError: the family's step view does not support scheduled sampling
            (`supports_scheduled_sampling`).
    """
    if not supports_scheduled_sampling(family):
        name = getattr(family.steps, "__name__", family.steps)
        raise ConfigError(
            "Scheduled sampling needs a family whose step view sets "
            "supports_scheduled_sampling = True, as RNNTranslatorSteps does. "
            f"Received: family.steps={name!r}",
            ["family"],
        )
    return family.steps(model, training=True)


def supports_scheduled_sampling(family: ModelFamily) -> bool:
    """Whether `family` trains with scheduled sampling: its step view declares
    `supports_scheduled_sampling = True` (its `training=True` view steps the gold target as the
    teacher-forced pass runs, e.g. `RNNTranslatorSteps`)."""
    return getattr(family.steps, "supports_scheduled_sampling", False) is True


class ScheduledSampling:
    """The training-mode logits of an RNN translator under scheduled sampling.

    `ScheduledSampling(model, family, schedule, constant, floor, seed)(features, step)` encodes
    `features["source_ids"]` `(batch, T_x)` and runs the decoder one position at a time over
    `features["target_ids"]` `(batch, T_y)` (START first): position 0 reads START; position
    `t > 0` reads the gold `target_ids[:, t]` where a coin with `P(heads) = epsilon_step` comes
    up heads, else a token drawn from `softmax(logits_{t-1})` of the same example. Padding
    positions (`target_ids == pad_id`) read padding. Returns the logits `(batch, T_y, V)`
    float32, to be scored against the labels as the teacher-forced logits are.

    The coins and samples of training step `step` are stateless functions of `(seed, step,
    replica)`, so a run resumed from a checkpoint repeats them. The loop is sequential in
    `T_y` (a `tf.while_loop` over the family's step view), where teacher forcing runs the
    decoder over all positions in one call.

    Args:
        model: an RNN translator (`rnn-plain`, `rnn-attention` or `rnn-luong`, any depth).
        family: its model family (whose `steps` is the step view).
        schedule, constant, floor: the decay of epsilon (`sampling_epsilon`).
        seed: the run's seed.
        pad_id: the padding id (0).
    """

    def __init__(
        self,
        model: keras.Model,
        family: ModelFamily,
        schedule: str,
        constant: float | None = None,
        floor: float | None = None,
        seed: int = 0,
        pad_id: int = 0,
    ):
        check_schedule(schedule, constant, floor)
        self.steps = training_steps(model, family)
        self.schedule = schedule
        self.constant = constant
        self.floor = floor
        self.seed = seed
        self.pad_id = pad_id

    def epsilon(self, step) -> tf.Tensor:
        """`epsilon_step` (float64)."""
        return sampling_epsilon(self.schedule, step, self.constant, self.floor)

    def __call__(self, features: dict, step) -> tf.Tensor:
        return self.decode(features, step)[0]

    def decode(self, features: dict, step) -> tuple[tf.Tensor, tf.Tensor]:
        """`(logits (batch, T_y, V) float32, inputs (batch, T_y) int32)`: the logits and the
        tokens the decoder read (gold or sampled) at training step `step`."""
        source_ids = tf.convert_to_tensor(features["source_ids"], tf.int32)
        gold = tf.convert_to_tensor(features["target_ids"], tf.int32)
        step = tf.cast(tf.convert_to_tensor(step), tf.int64)
        coin_seed, sample_seed = tf.unstack(
            tf.random.experimental.stateless_split(self._seed(step), num=2)
        )
        shape = tf.shape(gold)
        length = shape[1]
        epsilon = tf.cast(self.epsilon(step), tf.float32)
        heads = tf.random.stateless_uniform(shape, coin_seed) < epsilon
        take_gold = heads | tf.equal(gold, self.pad_id)
        state = self.steps.encode(source_ids)
        logits_0, state = self.steps.step(gold[:, 0], state)
        logits = tf.TensorArray(tf.float32, size=length, element_shape=logits_0.shape)
        inputs = tf.TensorArray(tf.int32, size=length, element_shape=(None,))
        logits = logits.write(0, logits_0)
        inputs = inputs.write(0, gold[:, 0])

        def body(t, previous, state, logits, inputs):
            drawn = tf.random.stateless_categorical(
                tf.stop_gradient(previous),
                1,
                tf.random.experimental.stateless_fold_in(sample_seed, tf.cast(t, tf.int64)),
                dtype=tf.int32,
            )[:, 0]
            token = tf.where(take_gold[:, t], gold[:, t], drawn)
            logits_t, state = self.steps.step(token, state)
            return t + 1, logits_t, state, logits.write(t, logits_t), inputs.write(t, token)

        _, _, _, logits, inputs = tf.while_loop(
            lambda t, *_: t < length,
            body,
            (tf.constant(1), logits_0, state, logits, inputs),
            shape_invariants=(
                tf.TensorShape([]),
                logits_0.shape,
                tf.nest.map_structure(lambda x: x.shape, state),
                tf.TensorShape(None),
                tf.TensorShape(None),
            ),
        )
        # (T_y, batch, V) -> (batch, T_y, V)
        return tf.transpose(logits.stack(), (1, 0, 2)), tf.transpose(inputs.stack())

    def _seed(self, step: tf.Tensor) -> tf.Tensor:
        """The `(2,)` int64 seed of training step `step` on this replica."""
        context = tf.distribute.get_replica_context()
        replica = 0 if context is None else context.replica_id_in_sync_group
        seed = tf.stack([tf.constant(self.seed, tf.int64), step])
        return tf.random.experimental.stateless_fold_in(seed, tf.cast(replica, tf.int64))
