"""The decay schedules of scheduled sampling (Bengio et al., 2015, arXiv:1506.03099, section 2.4).

`epsilon_i` is the probability of feeding a decoder the gold previous token at training step
`i` (teacher forcing); with probability `1 - epsilon_i` it reads its own prediction. Each
schedule decays `epsilon_i` from (nearly) 1 towards `floor` (default 0):

    linear:          epsilon_i = max(floor, 1 - c · i)                  slope c in (0, 1]
    exponential:     epsilon_i = max(floor, k^i)                        base k in (0, 1)
    inverse-sigmoid: epsilon_i = max(floor, k / (k + exp(i / k)))       k >= 1, finite

`keras-attn train --scheduled-sampling` and the output-feedback layers (`TeacherForcedRNN`,
`VectorToSequence`, whose `p_i = 1 - epsilon_i`) both compute them here.
"""

from __future__ import annotations

import math

from keras import ops

from keras_attn.errors import ConfigError

SCHEDULES = ("linear", "exponential", "inverse-sigmoid")

# The constant of each schedule when none is given: epsilon falls to 0.5 after about 5,000
# (linear), 3,466 (exponential) and 3,107 (inverse sigmoid) steps.
DEFAULT_CONSTANTS = {"linear": 1e-4, "exponential": 0.9998, "inverse-sigmoid": 500.0}

_VALID_CONSTANTS = {
    "linear": ("the slope c in (0, 1]", lambda c: math.isfinite(c) and 0.0 < c <= 1.0),
    "exponential": ("the base k in (0, 1)", lambda k: 0.0 < k < 1.0),
    "inverse-sigmoid": ("k >= 1 (finite)", lambda k: math.isfinite(k) and k >= 1.0),
}


def check_schedule(
    schedule: str,
    constant: float | None = None,
    *,
    schedule_name: str = "schedule",
    constant_name: str = "constant",
    choices: tuple[str, ...] = SCHEDULES,
) -> None:
    """Raise a `ConfigError` unless `schedule` is a known schedule and `constant` suits it.

    Args:
        schedule: `"linear"`, `"exponential"` or `"inverse-sigmoid"`.
        constant: the schedule's constant (the slope `c` or the base `k`); None stands for
            `DEFAULT_CONSTANTS[schedule]`.
        schedule_name, constant_name: the caller's names of the two arguments, used in the
            message and in `ConfigError.fields`.
        choices: the names the caller accepts, listed in the message of an unknown name
            (`SCHEDULES` and any of the caller's own, which it handles before calling this).

    Raises:
        ConfigError: an unknown `schedule`, or a `constant` outside the schedule's range.

    Example:

    >>> check_schedule("cosine", schedule_name="scheduled_sampling")
    Traceback (most recent call last):
    ...
    keras_attn.errors.ConfigError: Expected scheduled_sampling in {linear, exponential, \
inverse-sigmoid}. Received: scheduled_sampling='cosine'
    """
    if schedule not in SCHEDULES:
        raise ConfigError(
            f"Expected {schedule_name} in {{{', '.join(choices)}}}. "
            f"Received: {schedule_name}={schedule!r}",
            [schedule_name],
        )
    if constant is None:
        return
    needs, valid = _VALID_CONSTANTS[schedule]
    if not valid(float(constant)):
        raise ConfigError(
            f"{constant_name} of {schedule_name}={schedule!r} is {needs}. "
            f"Received: {constant_name}={constant}",
            [schedule_name, constant_name],
        )


def teacher_forcing_probability(
    schedule: str,
    step,
    constant: float | None = None,
    floor: float = 0.0,
    dtype: str = "float32",
):
    """`epsilon_i`, the probability of feeding the gold previous token at training step `i`.

    Args:
        schedule: `"linear"`, `"exponential"` or `"inverse-sigmoid"` (see the module docstring).
        step: `i`, the training steps done before this one (an int or an integer scalar tensor,
            e.g. `optimizer.iterations`).
        constant: the slope `c` (linear) or the base `k` (exponential, inverse sigmoid); None:
            `DEFAULT_CONSTANTS[schedule]`.
        floor: the least `epsilon_i`, in [0, 1].
        dtype: the float dtype of the result and of the computation.

    Returns:
        A scalar tensor in `[floor, 1]`.

    Raises:
        ConfigError: as `check_schedule`.

    Example:

    >>> round(float(teacher_forcing_probability("linear", 2000, 2e-4)), 6)
    0.6
    >>> round(float(teacher_forcing_probability("inverse-sigmoid", 0, 10.0)), 6)
    0.909091
    """
    check_schedule(schedule, constant)
    k = DEFAULT_CONSTANTS[schedule] if constant is None else float(constant)
    i = ops.cast(step, dtype)
    if schedule == "linear":
        epsilon = 1.0 - k * i
    elif schedule == "exponential":
        epsilon = ops.power(ops.convert_to_tensor(k, dtype), i)
    else:
        # k / (k + exp(i / k)) = sigmoid(log k - i / k): no overflow for a large i.
        epsilon = ops.sigmoid(ops.convert_to_tensor(math.log(k), dtype) - i / k)
    floor = ops.convert_to_tensor(floor, dtype)
    # Not ops.maximum: under PyTorch, Keras 3.15 gives it float32 for two float64 operands.
    return ops.where(epsilon < floor, floor, epsilon)
