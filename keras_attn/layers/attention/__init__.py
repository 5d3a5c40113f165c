from keras_attn.layers.attention.attention import Attention

__all__ = ["Attention"]
