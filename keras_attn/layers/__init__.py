"""Public layers: attention, recurrent, Transformer and embedding blocks."""

from keras_attn.layers.attention import Attention
from keras_attn.layers.recurrent import BahdanauDecoder, BidirectionalEncoder

__all__ = ["Attention", "BahdanauDecoder", "BidirectionalEncoder"]
