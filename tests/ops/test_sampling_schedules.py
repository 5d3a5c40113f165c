"""The schedules of scheduled sampling against Bengio et al.'s formulas, in float32 and float64;
one spelling, and a `ConfigError` naming the caller's arguments for anything else."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.errors import ConfigError
from keras_attn.layers import TeacherForcedRNN
from keras_attn.ops.sampling_schedules import (
    DEFAULT_CONSTANTS,
    SCHEDULES,
    check_schedule,
    teacher_forcing_probability,
)

pytestmark = pytest.mark.every_backend

STEPS = np.array([0, 1, 10, 100, 1_000, 5_000, 20_000])
FORMULAS = {
    "linear": (0.01, lambda c, i: 1.0 - c * i),
    "exponential": (0.99, lambda k, i: k**i),
    "inverse-sigmoid": (50.0, lambda k, i: k / (k + np.exp(i / k))),
}


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("float64", 1e-12)])
def test_values_follow_the_papers_formulas_above_the_floor(schedule, dtype, rtol):
    if dtype == "float64" and keras.backend.backend() == "jax":
        import jax

        if not jax.config.jax_enable_x64:
            pytest.skip("JAX has no float64 unless jax_enable_x64 is set")
    constant, formula = FORMULAS[schedule]
    for floor in (0.0, 0.3):
        got = [
            ops.convert_to_numpy(teacher_forcing_probability(schedule, i, constant, floor, dtype))
            for i in STEPS
        ]
        assert {str(value.dtype) for value in got} == {dtype}
        with np.errstate(over="ignore"):
            expected = np.maximum(floor, formula(constant, STEPS.astype("float64")))
        np.testing.assert_allclose(np.array(got, "float64"), expected, rtol=rtol, atol=1e-7)


def test_no_constant_is_the_default_one():
    for schedule in SCHEDULES:
        default = float(teacher_forcing_probability(schedule, 700))
        given = float(teacher_forcing_probability(schedule, 700, DEFAULT_CONSTANTS[schedule]))
        assert default == given < 1.0


@pytest.mark.parametrize(
    "schedule, constant, match",
    [
        ("inverse_sigmoid", None, r"Expected s in \{linear, exponential, inverse-sigmoid\}. "
         r"Received: s='inverse_sigmoid'"),
        ("cosine", 0.5, "Received: s='cosine'"),
        ("linear", 1.5, r"c of s='linear' is the slope c in \(0, 1\]. Received: c=1.5"),
        ("linear", float("nan"), "Received: c=nan"),
        ("exponential", 1.0, r"the base k in \(0, 1\). Received: c=1.0"),
        ("inverse-sigmoid", 0.5, r"k >= 1 \(finite\). Received: c=0.5"),
        ("inverse-sigmoid", float("inf"), "Received: c=inf"),
    ],
)  # fmt: skip
def test_anything_else_is_a_config_error_naming_the_callers_arguments(schedule, constant, match):
    with pytest.raises(ConfigError, match=match) as caught:
        check_schedule(schedule, constant, schedule_name="s", constant_name="c")
    assert set(caught.value.fields) <= {"s", "c"} and "s" in caught.value.fields
    with pytest.raises(ConfigError):
        teacher_forcing_probability(schedule, 0, constant)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_the_output_feedback_layers_use_the_same_schedules(schedule):
    """`p_i` of `TeacherForcedRNN` is `1 - epsilon_i`, its cap `1 - floor`."""
    constant, _ = FORMULAS[schedule]
    layer = TeacherForcedRNN(
        4, output_units=2, schedule=schedule, decay=constant, sampling_probability=0.6
    )
    for i in STEPS:
        epsilon = teacher_forcing_probability(schedule, i, constant, floor=0.4)
        assert float(layer.sampling_probability_at(i)) == pytest.approx(1.0 - float(epsilon))
