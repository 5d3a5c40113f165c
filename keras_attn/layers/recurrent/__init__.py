from keras_attn.layers.recurrent.bahdanau_decoder import BahdanauDecoder
from keras_attn.layers.recurrent.bidirectional_encoder import BidirectionalEncoder

__all__ = ["BahdanauDecoder", "BidirectionalEncoder"]
