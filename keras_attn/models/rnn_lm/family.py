"""The `rnn-lm` family: a recurrent language model trained on the corpus' target side and
exported as a generator."""

from __future__ import annotations

import functools

import keras

from keras_attn.models.family import Family
from keras_attn.models.rnn.family import RNN_TUNING
from keras_attn.models.rnn_lm.model import rnn_lm
from keras_attn.models.rnn_lm.options import RNNLMOptions
from keras_attn.models.rnn_lm.steps import RNNLMSteps


# A generator's builder receives `max_length=positions` (the language-model task's); a recurrent
# model reads sequences of any length, so `rnn_lm` takes no such argument.
@functools.wraps(rnn_lm)
def rnn_lm_model(vocabulary_size: int, max_length: int | None = None, **options) -> keras.Model:
    return rnn_lm(vocabulary_size, **options)


RNN_LM = Family(
    build=rnn_lm_model,
    steps=RNNLMSteps,
    options=RNNLMOptions,
    task="language_model",
    **RNN_TUNING,
)
