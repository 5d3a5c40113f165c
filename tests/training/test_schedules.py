import keras
import numpy as np
import pytest

from keras_attn.training.schedules import (
    HalvingSchedule,
    InverseSqrtSchedule,
    warmup_cosine_schedule,
)
from keras_attn.training.trainer import TrainConfig, learning_rate_schedule

STEPS = [0, 1, 7, 8, 9, 10, 11, 50, 99, 100, 150, 1000, 123456]


def inverse_sqrt_reference(step, d_model, warmup, scale=1.0):
    """Vaswani et al. eq. (3), with the 1-based step number n = optimizer iterations + 1."""
    n = step + 1.0
    return scale * d_model**-0.5 * min(n**-0.5, n * warmup**-1.5)


def cosine_reference(step, peak, warmup, total, alpha=0.05):
    warmup = min(warmup, max(total - 1, 0))
    if step < warmup:
        return peak * step / warmup
    progress = min(step - warmup, total - warmup) / max(total - warmup, 1)
    return peak * (alpha + (1 - alpha) * 0.5 * (1 + np.cos(np.pi * progress)))


@pytest.mark.parametrize("d_model,warmup,scale", [(512, 4000, 1.0), (64, 10, 2.0), (8, 1, 0.3)])
def test_inverse_sqrt_matches_the_formula(d_model, warmup, scale):
    schedule = InverseSqrtSchedule(d_model, warmup, scale)
    for step in [*STEPS, warmup - 1, warmup, 4 * warmup - 1]:
        expected = inverse_sqrt_reference(step, d_model, warmup, scale)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-6), step


def test_inverse_sqrt_shape_peak_and_from_peak():
    schedule = InverseSqrtSchedule.from_peak(2e-3, warmup_steps=20, d_model=128)
    rates = np.array([float(schedule(s)) for s in range(200)])
    assert int(np.argmax(rates)) == 19  # n = 20 = warmup_steps
    assert rates[19] == pytest.approx(2e-3, rel=1e-6)
    np.testing.assert_allclose(rates[:20], 2e-3 * np.arange(1, 21) / 20, rtol=1e-6)  # linear
    assert rates[79] == pytest.approx(1e-3, rel=1e-6)  # half the peak at n = 4 · warmup
    assert np.all(np.diff(rates[19:]) < 0)
    other = InverseSqrtSchedule.from_peak(2e-3, warmup_steps=20, d_model=512)
    assert float(other(57)) == pytest.approx(rates[57], rel=1e-6)  # d_model cancels


def test_inverse_sqrt_rejects_bad_arguments():
    with pytest.raises(ValueError, match="warmup_steps=0"):
        InverseSqrtSchedule(128, 0)
    with pytest.raises(ValueError, match="d_model=-1"):
        InverseSqrtSchedule(-1, 10)
    with pytest.raises(ValueError, match="peak=0"):
        InverseSqrtSchedule.from_peak(0, 10)


@pytest.mark.parametrize("warmup,total", [(10, 110), (0, 50), (100, 40), (1, 2)])
def test_warmup_cosine_matches_the_formula(warmup, total):
    schedule = warmup_cosine_schedule(3e-3, warmup, total)
    for step in [s for s in STEPS if s <= total] + [total, total + 5]:
        expected = cosine_reference(step, 3e-3, warmup, total)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-5, abs=1e-10), step


def halving_reference(step, peak, start, every, warmup):
    """Luong et al.'s recipe, counted by hand: peak until `start`, then one halving per `every`."""
    rate = peak
    for _ in range(max(start, warmup), step + 1, every):
        rate /= 2
    if step < warmup:
        rate = min(rate, peak * step / warmup)
    return rate


@pytest.mark.parametrize(
    "start,every,warmup", [(2105, 421, 0), (50, 10, 0), (0, 1, 0), (50, 10, 8), (3, 5, 20)]
)
def test_halving_matches_the_recipe(start, every, warmup):
    schedule = HalvingSchedule(1.5, start, every, warmup_steps=warmup)
    for step in [*STEPS, start - 1, start, start + every - 1, start + every, warmup - 1]:
        if step < 0:
            continue
        expected = halving_reference(step, 1.5, start, every, warmup)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-6, abs=1e-30), step


def test_halving_luong_epochs():
    """Five passes at the peak, then half after each pass (421 batches per pass here)."""
    schedule = HalvingSchedule(1.0, decay_start=5 * 421, decay_every=421)
    passes = [float(schedule(421 * p)) for p in range(10)]
    assert passes == [1.0] * 5 + [0.5, 0.25, 0.125, 0.0625, 0.03125]


def test_halving_rejects_bad_arguments():
    with pytest.raises(ValueError, match="decay_every=0"):
        HalvingSchedule(1.0, 10, 0)
    with pytest.raises(ValueError, match="decay_start=-1"):
        HalvingSchedule(1.0, -1, 5)
    with pytest.raises(ValueError, match="peak=0"):
        HalvingSchedule(0.0, 1, 5)
    with pytest.raises(ValueError, match="warmup_steps=-2"):
        HalvingSchedule(1.0, 1, 5, warmup_steps=-2)


@pytest.mark.parametrize(
    "schedule",
    [
        InverseSqrtSchedule(96, 25, 0.7),
        warmup_cosine_schedule(1e-3, 10, 100),
        HalvingSchedule(0.3, 5, 3, warmup_steps=2),
    ],
)
def test_schedules_serialize_inside_the_optimizer(schedule):
    optimizer = keras.optimizers.Adam(schedule)
    config = keras.saving.serialize_keras_object(optimizer)
    restored = keras.saving.deserialize_keras_object(config)
    assert type(restored.learning_rate) is not float
    variables = [keras.Variable(np.ones(3))]
    for opt in (optimizer, restored):
        opt.build(variables)
        for _ in range(12):
            opt.apply([np.full(3, 0.1, "float32")], variables)
    # the optimizer reads the schedule at its update counter
    assert int(restored.iterations) == 12
    assert float(restored.learning_rate) == pytest.approx(float(schedule(12)), rel=1e-6)
    assert float(restored.learning_rate) == pytest.approx(float(optimizer.learning_rate))


def test_the_trainer_picks_the_schedule_from_the_config():
    config = TrainConfig(steps=300, learning_rate=1e-3, warmup_steps=30, schedule="inverse-sqrt")
    schedule = learning_rate_schedule(config)
    assert isinstance(schedule, InverseSqrtSchedule)
    assert float(schedule(29)) == pytest.approx(1e-3, rel=1e-6)
    assert float(schedule(299)) == pytest.approx(1e-3 * np.sqrt(30 / 300), rel=1e-6)
    cosine = learning_rate_schedule(TrainConfig(steps=300, learning_rate=1e-3, warmup_steps=30))
    assert float(cosine(30)) == pytest.approx(1e-3) and float(cosine(300)) == pytest.approx(5e-5)
    halving = learning_rate_schedule(
        TrainConfig(learning_rate=0.5, warmup_steps=0, schedule="halving", decay_start=20,
                    decay_every=7)
    )  # fmt: skip
    assert isinstance(halving, HalvingSchedule)
    assert [float(halving(s)) for s in (19, 20, 26, 27)] == [0.5, 0.25, 0.25, 0.125]
