"""Functional-API builders for the seed architectures, and their decoding views."""

from keras_attn.models.luong_translator_steps import LuongTranslatorSteps
from keras_attn.models.rnn_luong_translator import rnn_luong_translator
from keras_attn.models.rnn_translator import rnn_attention_translator
from keras_attn.models.rnn_translator_steps import RNNTranslatorSteps
from keras_attn.models.transformer_translator import transformer_translator
from keras_attn.models.transformer_translator_steps import TransformerTranslatorSteps

__all__ = [
    "LuongTranslatorSteps",
    "RNNTranslatorSteps",
    "TransformerTranslatorSteps",
    "rnn_attention_translator",
    "rnn_luong_translator",
    "transformer_translator",
]
