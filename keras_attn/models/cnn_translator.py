"""The module `.keras` files of the `cnn-rnn` family saved before it moved to its folder name for
`ConvolutionalEncoder`; the family lives in `keras_attn/models/cnn_rnn/`."""

from keras_attn.models.cnn_rnn.model import ConvolutionalEncoder, cnn_translator

__all__ = ["ConvolutionalEncoder", "cnn_translator"]
