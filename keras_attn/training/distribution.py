"""Deprecated: use `keras_attn.training.strategy` and `keras_attn.training.optimizers`.

This module re-exports their names for one release and warns with a DeprecationWarning on
import.
"""

import warnings

from keras_attn.training.optimizers import (  # noqa: F401
    OPTIMIZERS,
    ReducedGradientsAdam,
    ReducedGradientsSGD,
)
from keras_attn.training.strategy import (  # noqa: F401
    STRATEGIES,
    barrier,
    check_global_batch,
    distributed_batches,
    is_chief,
    make_strategy,
)

warnings.warn(
    "keras_attn.training.distribution is deprecated: import keras_attn.training.strategy "
    "(tf.distribute helpers) or keras_attn.training.optimizers (OPTIMIZERS)",
    DeprecationWarning,
    stacklevel=2,
)
