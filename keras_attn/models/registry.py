"""Deprecated: use `keras_attn.models.families`.

This module re-exports its names for one release and warns with a DeprecationWarning on import.
"""

import warnings

from keras_attn.models.families import (  # noqa: F401
    MODEL_FAMILIES,
    ModelFamily,
    get_family,
    register_family,
)

warnings.warn(
    "keras_attn.models.registry is deprecated: import keras_attn.models.families",
    DeprecationWarning,
    stacklevel=2,
)
