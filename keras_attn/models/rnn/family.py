"""The recurrent translator families: `rnn-plain`, `rnn-attention` and `rnn-luong`."""

from __future__ import annotations

import functools
from collections.abc import Callable

import keras

from keras_attn.models.family import Family
from keras_attn.models.rnn.attention import rnn_attention_translator
from keras_attn.models.rnn.luong import rnn_luong_translator
from keras_attn.models.rnn.options import (
    BUILDER_KEYWORDS,
    RNNAttentionOptions,
    RNNLuongOptions,
    RNNPlainOptions,
)
from keras_attn.models.rnn.plain import rnn_plain_translator
from keras_attn.models.rnn.steps import RNNTranslatorSteps

# The training schedule `keras-attn train` uses where no tuning flag is given: Adam's 3e-3 (that of
# the tuned runs in docs/results.md) with 100 warm-up steps, decaying to 5 % at `--steps` (cosine):
# at the default 2,000 steps it beats the tuned runs' inverse-sqrt schedule, which suits a time
# budget (docs/results.md, "The command line's defaults").
RNN_TUNING = {"learning_rate": 3e-3, "warmup_steps": 100, "schedule": "cosine"}


def taking_options(builder: Callable[..., keras.Model]) -> Callable[..., keras.Model]:
    """`builder` called with the family's options: each option of `BUILDER_KEYWORDS` passed
    under the builder's keyword (`gru_reset_after` as `reset_after`)."""

    @functools.wraps(builder)
    def build(*sizes: int, **options) -> keras.Model:
        keywords = {BUILDER_KEYWORDS.get(name, name): value for name, value in options.items()}
        return builder(*sizes, **keywords)

    return build


RNN_PLAIN = Family(
    build=taking_options(rnn_plain_translator),
    steps=RNNTranslatorSteps,
    options=RNNPlainOptions,
    **RNN_TUNING,
)
RNN_ATTENTION = Family(
    build=taking_options(rnn_attention_translator),
    steps=RNNTranslatorSteps,
    options=RNNAttentionOptions,
    **RNN_TUNING,
)
RNN_LUONG = Family(
    build=taking_options(rnn_luong_translator),
    steps=RNNTranslatorSteps,
    options=RNNLuongOptions,
    **RNN_TUNING,
)
