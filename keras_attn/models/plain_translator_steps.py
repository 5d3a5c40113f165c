"""`PlainTranslatorSteps`: another name of `RNNTranslatorSteps`, the step view of every recurrent
model (a `rnn_plain_translator` included)."""

from keras_attn.models.rnn_translator_steps import PlainTranslatorSteps

__all__ = ["PlainTranslatorSteps"]
