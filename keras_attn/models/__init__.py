"""Functional-API builders for the seed architectures, and their decoding views."""

from keras_attn.models.rnn_translator import rnn_attention_translator
from keras_attn.models.rnn_translator_steps import RNNTranslatorSteps

__all__ = ["RNNTranslatorSteps", "rnn_attention_translator"]
