"""Position encodings and the Transformer's token + position input embedding."""

from keras_attn.layers.embedding.position_embedding import PositionEmbedding
from keras_attn.layers.embedding.sinusoidal_position_encoding import SinusoidalPositionEncoding
from keras_attn.layers.embedding.token_and_position_embedding import TokenAndPositionEmbedding

__all__ = ["PositionEmbedding", "SinusoidalPositionEncoding", "TokenAndPositionEmbedding"]
