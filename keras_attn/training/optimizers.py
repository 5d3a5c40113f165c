"""The optimizers `train` builds, by the name `TrainConfig.optimizer` gives."""

from __future__ import annotations

import keras

from keras_attn._private import SummedGradientsMixin


class ReducedGradientsAdam(SummedGradientsMixin, keras.optimizers.Adam):
    """Adam that takes gradients already summed over the replicas by the train step."""


class ReducedGradientsSGD(SummedGradientsMixin, keras.optimizers.SGD):
    """Plain SGD that takes gradients already summed over the replicas by the train step."""


# `TrainConfig.optimizer` names and the classes the trainer builds for them.
OPTIMIZERS = {"adam": ReducedGradientsAdam, "sgd": ReducedGradientsSGD}
