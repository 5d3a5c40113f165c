"""Transformer blocks and stacks: feed-forward network, encoder and decoder layers."""

from keras_attn.layers.transformer.feed_forward import FeedForward
from keras_attn.layers.transformer.transformer_decoder import TransformerDecoder
from keras_attn.layers.transformer.transformer_decoder_block import TransformerDecoderBlock
from keras_attn.layers.transformer.transformer_encoder import TransformerEncoder
from keras_attn.layers.transformer.transformer_encoder_block import TransformerEncoderBlock

__all__ = [
    "FeedForward",
    "TransformerDecoder",
    "TransformerDecoderBlock",
    "TransformerEncoder",
    "TransformerEncoderBlock",
]
