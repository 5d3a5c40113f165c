"""Pooling of a sequence of hidden states into one vector per sequence."""

from keras_attn.layers.pooling.token_pooling import TokenPooling

__all__ = ["TokenPooling"]
