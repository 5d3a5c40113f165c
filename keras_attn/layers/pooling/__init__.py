"""Pooling: one vector per sequence, or sub-sampling over windows of neighbouring steps."""

from keras_attn.layers.pooling.neighbourhood_pooling import NeighbourhoodPooling1D
from keras_attn.layers.pooling.token_pooling import TokenPooling

__all__ = ["NeighbourhoodPooling1D", "TokenPooling"]
