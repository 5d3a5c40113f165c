"""Learning-rate schedules of `keras-attn train`: warm-up + cosine decay, inverse square root, and
Luong et al.'s halving.

All are serializable `keras.optimizers.schedules.LearningRateSchedule`s and functions of the
optimizer's step counter only, so a resumed run follows them exactly.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_attn import _serializables
from keras_attn.api_export import keras_attn_export

SCHEDULES = ("cosine", "inverse-sqrt", "halving")


def warmup_cosine_schedule(
    peak: float, warmup_steps: int, total_steps: int, alpha: float = 0.05
) -> keras.optimizers.schedules.CosineDecay:
    """Linear warm-up from 0 to `peak` over `warmup_steps`, then cosine decay to `alpha * peak`.

        lr(s) = peak · s / w                                             s < w
        lr(s) = peak · (alpha + (1 - alpha) · ½ (1 + cos(π (s - w) / (S - w))))   w ≤ s ≤ S

    with `s` the optimizer's update counter (0 for the first update), `w = min(warmup_steps,
    S - 1)` and `S = total_steps`; `warmup_steps=0` starts at `peak`. This is Keras' `CosineDecay`
    with its warm-up arguments. Extending `total_steps` on resume stretches the remaining decay.

    Example:

    >>> schedule = warmup_cosine_schedule(1e-3, warmup_steps=10, total_steps=110)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 60, 110)]
    [0.0, 0.0005, 0.001, 0.000525, 5e-05]
    """
    warmup = min(warmup_steps, max(total_steps - 1, 0))
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0,
        decay_steps=max(total_steps - warmup, 1),
        alpha=alpha,
        warmup_target=peak,
        warmup_steps=warmup,
    )


@keras_attn_export("keras_attn.training.schedules.InverseSqrtSchedule")
class InverseSqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """The Transformer's warm-up schedule: linear rise, then decay as the inverse square root.

        lr(n) = scale · d_model^-0.5 · min(n^-0.5, n · warmup_steps^-1.5),   n = s + 1

    `s` is the optimizer's update counter (0 for the first update), so `n` is Vaswani et al.'s
    1-based step number and the first update already has a non-zero rate. The rate grows linearly
    for `warmup_steps` steps, peaks at `n = warmup_steps` with
    `scale · (d_model · warmup_steps)^-0.5`, and then falls as `n^-0.5` (half the peak at
    `4 · warmup_steps`). The paper's setting is `d_model=512, warmup_steps=4000, scale=1`
    (peak ≈ 7.0e-4). `from_peak` chooses `scale` for a given peak rate.

    Args:
        d_model: model width `d_model`.
        warmup_steps: steps of linear warm-up (`warmup_steps` in the paper), >= 1.
        scale: constant factor in front (OpenNMT's "learning_rate" under Noam decay).

    Example:

    >>> schedule = InverseSqrtSchedule(d_model=512, warmup_steps=4000)
    >>> [round(float(schedule(s)), 7) for s in (0, 3999, 15999)]
    [2e-07, 0.0006988, 0.0003494]

    References:
        Vaswani et al., 2017, "Attention Is All You Need", eq. (3) in section 5.3,
        arXiv:1706.03762.
    """

    def __init__(self, d_model: int, warmup_steps: int, scale: float = 1.0):
        if d_model <= 0:
            raise ValueError(f"Expected d_model > 0. Received: d_model={d_model}")
        if warmup_steps < 1:
            raise ValueError(f"Expected warmup_steps >= 1. Received: warmup_steps={warmup_steps}")
        if scale <= 0:
            raise ValueError(f"Expected scale > 0. Received: scale={scale}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    @classmethod
    def from_peak(cls, peak: float, warmup_steps: int, d_model: int = 512) -> InverseSqrtSchedule:
        """The schedule whose rate at step `warmup_steps` is `peak`.

        `scale = peak · (d_model · warmup_steps)^0.5`; `d_model` cancels out of the rates.
        """
        if peak <= 0:
            raise ValueError(f"Expected peak > 0. Received: peak={peak}")
        if warmup_steps < 1:
            raise ValueError(f"Expected warmup_steps >= 1. Received: warmup_steps={warmup_steps}")
        return cls(d_model, warmup_steps, scale=peak * math.sqrt(d_model * warmup_steps))

    def __call__(self, step):
        n = ops.cast(step, "float32") + 1.0
        rise = n * float(self.warmup_steps) ** -1.5
        fall = ops.rsqrt(n)
        return self.scale * float(self.d_model) ** -0.5 * ops.minimum(rise, fall)

    def get_config(self) -> dict:
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


@keras_attn_export("keras_attn.training.schedules.HalvingSchedule")
class HalvingSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Constant rate, then halved every `decay_every` updates from update `decay_start` on.

        lr(s) = peak · s / w                                          s < w
        lr(s) = peak                                                  w ≤ s < S
        lr(s) = peak · 0.5^(1 + ⌊(s - S) / E⌋)                        s ≥ S

    with `s` the optimizer's update counter (0 for the first update), `w = warmup_steps` (0: no
    warm-up), `S = max(decay_start, w)` and `E = decay_every`. This is Luong et al.'s plain-SGD
    recipe (rate 1.0 for five epochs, then halved after every epoch; section 4.1 of the paper)
    with epochs written as update counts: `decay_start = 5 · E`, `E` = batches per pass.

    Args:
        peak: the constant rate (`--learning-rate`).
        decay_start: update at which the rate first halves.
        decay_every: updates between halvings, >= 1.
        warmup_steps: updates of linear warm-up from 0 to `peak`.

    Example:

    >>> schedule = HalvingSchedule(1.0, decay_start=50, decay_every=10)
    >>> [float(schedule(s)) for s in (0, 49, 50, 59, 60, 75)]
    [1.0, 1.0, 0.5, 0.5, 0.25, 0.125]

    References:
        Luong, Pham and Manning, 2015, "Effective Approaches to Attention-based Neural Machine
        Translation", section 4.1, arXiv:1508.04025.
    """

    def __init__(self, peak: float, decay_start: int, decay_every: int, warmup_steps: int = 0):
        if peak <= 0:
            raise ValueError(f"Expected peak > 0. Received: peak={peak}")
        if decay_start < 0:
            raise ValueError(f"Expected decay_start >= 0. Received: decay_start={decay_start}")
        if decay_every < 1:
            raise ValueError(f"Expected decay_every >= 1. Received: decay_every={decay_every}")
        if warmup_steps < 0:
            raise ValueError(f"Expected warmup_steps >= 0. Received: warmup_steps={warmup_steps}")
        self.peak = peak
        self.decay_start = decay_start
        self.decay_every = decay_every
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        s = ops.cast(step, "float32")
        start = float(max(self.decay_start, self.warmup_steps))
        # number of halvings so far: 0 before `start`, 1 from `start`, one more every E updates
        halvings = ops.where(s < start, 0.0, ops.floor((s - start) / self.decay_every) + 1.0)
        rate = self.peak * ops.power(0.5, halvings)
        if self.warmup_steps:
            rate = ops.minimum(rate, self.peak * s / float(self.warmup_steps))
        return rate

    def get_config(self) -> dict:
        return {
            "peak": self.peak,
            "decay_start": self.decay_start,
            "decay_every": self.decay_every,
            "warmup_steps": self.warmup_steps,
        }


_serializables.imported(__name__)
