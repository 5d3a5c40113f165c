"""`LuongTranslatorSteps`: another name of `RNNTranslatorSteps`, the step view of every recurrent
model (a `rnn_luong_translator` included)."""

from keras_attn.models.rnn_translator_steps import LuongTranslatorSteps

__all__ = ["LuongTranslatorSteps"]
