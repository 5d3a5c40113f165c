"""The layer argument checks, kept importable here for the Transformer and embedding layers."""

from keras_attn.layers._arguments import (
    check_positive_float,
    check_positive_int,
    check_rate,
    get_activation,
)

__all__ = ["check_positive_float", "check_positive_int", "check_rate", "get_activation"]
