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

`i` is the number of training steps done before the current one. The sampled tokens are drawn
from `softmax(logits)` (as Bengio et al. sample, not the argmax) and are not differentiated
through: the gradient flows through each step's logits and the recurrent states, not through
the choice of the next input. Every random number is a stateless function of the run's seed,
the step and the decoder position, so a resumed run draws what the uninterrupted run drew.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from keras_attn.models import rnn_translator as names
from keras_attn.models.families import ModelFamily
from keras_attn.models.rnn_translator_steps import RNNTranslatorSteps

SCHEDULES = ("linear", "exponential", "inverse-sigmoid")

# The constant of each schedule when the run names none: epsilon falls to 0.5 after about
# 5,000 (linear), 3,500 (exponential) and 3,100 (inverse sigmoid) steps.
DEFAULT_CONSTANTS = {"linear": 1e-4, "exponential": 0.9998, "inverse-sigmoid": 500.0}

# Names of the dropout layers the RNN translator builders put around the encoder and decoder.
SOURCE_DROPOUT = "source_dropout"
TARGET_DROPOUT = "target_dropout"
OUTPUT_DROPOUT = "output_dropout"


def check_schedule(schedule: str, constant: float | None, floor: float | None) -> None:
    """Raise a ValueError naming the argument if `(schedule, constant, floor)` is not usable.

    `constant` None stands for `DEFAULT_CONSTANTS[schedule]`; `floor` applies to `linear` only.
    """
    if schedule not in SCHEDULES:
        raise ValueError(
            f"Expected scheduled_sampling in {{{', '.join(SCHEDULES)}}}. Received: {schedule!r}"
        )
    if constant is not None:
        valid = {
            "linear": math.isfinite(constant) and 0.0 < constant <= 1.0,
            "exponential": 0.0 < constant < 1.0,
            "inverse-sigmoid": math.isfinite(constant) and constant >= 1.0,
        }[schedule]
        if not valid:
            needs = {
                "linear": "the slope c in (0, 1]",
                "exponential": "the base k in (0, 1)",
                "inverse-sigmoid": "k >= 1 (finite)",
            }[schedule]
            raise ValueError(
                f"sampling_constant of scheduled_sampling={schedule!r} is {needs}. "
                f"Received: sampling_constant={constant}"
            )
    if floor is not None:
        if schedule != "linear":
            raise ValueError(
                f"sampling_floor applies to scheduled_sampling='linear' only. Received: "
                f"scheduled_sampling={schedule!r}"
            )
        if not 0.0 <= floor < 1.0:
            raise ValueError(f"Expected sampling_floor in [0, 1). Received: {floor}")


def sampling_epsilon(
    schedule: str, step, constant: float | None = None, floor: float | None = None
) -> tf.Tensor:
    """`epsilon_i`, the probability of feeding the gold previous token at training step `i`.

    Args:
        schedule: `"linear"`, `"exponential"` or `"inverse-sigmoid"` (see the module docstring).
        step: `i`, the training steps done before this one (an int or an integer tensor).
        constant: the schedule's constant: the slope `c` (linear), the base `k` (exponential) or
            `k` (inverse sigmoid); None: `DEFAULT_CONSTANTS[schedule]`.
        floor: linear only, the minimum `epsilon` (default 0).

    Returns:
        A float64 scalar tensor in [0, 1].

    Example:

    >>> round(float(sampling_epsilon("linear", 2000, 2e-4)), 6)
    0.6
    >>> round(float(sampling_epsilon("inverse-sigmoid", 0, 10.0)), 6)
    0.909091
    """
    check_schedule(schedule, constant, floor)
    k = DEFAULT_CONSTANTS[schedule] if constant is None else constant
    i = tf.cast(step, tf.float64)
    if schedule == "linear":
        return tf.maximum(tf.constant(floor or 0.0, tf.float64), 1.0 - k * i)
    if schedule == "exponential":
        return tf.pow(tf.constant(k, tf.float64), i)
    # k / (k + exp(i / k)) = 1 / (1 + exp(i / k - log k)): no overflow for a large i.
    return tf.sigmoid(math.log(k) - i / k)


class _TrainingLayer:
    """A layer of a step view called as the model calls it in training.

    `training=True` reaches the layer's `__call__` and `step`, and the model's dropout layers
    around it run before (`before`) or after (`after`) it; other attributes are the layer's.
    """

    def __init__(self, layer, before=None, after=None, takes_training: bool = True):
        self.layer = layer
        self.before = before
        self.after = after
        self.takes_training = takes_training

    def __call__(self, inputs, *args, **kwargs):
        if self.before is not None:
            inputs = self.before(inputs, training=True)
        if self.takes_training:
            kwargs["training"] = True
        outputs = self.layer(inputs, *args, **kwargs)
        return outputs if self.after is None else self.after(outputs, training=True)

    def step(self, *args, **kwargs):
        return self.layer.step(*args, **{**kwargs, "training": True})

    def __getattr__(self, name):
        return getattr(self.layer, name)


def training_steps(model: keras.Model, family: ModelFamily) -> RNNTranslatorSteps:
    """The family's step view of `model`, computing what `model(..., training=True)` computes.

    The step views run the model's layers with dropout off (decoding); this one calls them in
    training mode and applies the model's source, target and output dropout, so that stepping
    it over the gold target reproduces the teacher-forced training pass (with the same dropout
    masks when the rates are 0, and masks of the same distribution otherwise).
    """
    steps = family.steps(model)
    if not isinstance(steps, RNNTranslatorSteps):
        raise ValueError(
            f"Scheduled sampling needs an RNN translator's step view. Received: "
            f"{type(steps).__name__}"
        )
    steps.source_embedding = _TrainingLayer(
        steps.source_embedding, after=model.get_layer(SOURCE_DROPOUT), takes_training=False
    )
    steps.encoder = _TrainingLayer(steps.encoder)
    steps.target_embedding = _TrainingLayer(
        steps.target_embedding, after=model.get_layer(TARGET_DROPOUT), takes_training=False
    )
    steps.decoder = _TrainingLayer(steps.decoder)
    steps.output_projection = _TrainingLayer(
        model.get_layer(names.OUTPUT_PROJECTION),
        before=model.get_layer(OUTPUT_DROPOUT),
        takes_training=False,
    )
    return steps


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
