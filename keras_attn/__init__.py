"""keras_attn: recurrent, attention and Transformer layers for Keras 3, exportable to TF Serving."""

__version__ = "0.1.0"

from keras_attn import distributions, layers, ops, scores  # noqa: E402,F401
