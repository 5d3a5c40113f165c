"""The `cnn-rnn` family, registered under that name; its options are `CNNTranslatorOptions`."""

from __future__ import annotations

from keras_attn.models.cnn_rnn.model import cnn_translator
from keras_attn.models.cnn_rnn.options import CNNTranslatorOptions
from keras_attn.models.family import Family, register_family
from keras_attn.models.rnn.steps import RNNTranslatorSteps

__all__ = ["CNN_TRANSLATOR", "CNNTranslatorOptions"]

CNN_TRANSLATOR = register_family(
    Family(
        name="cnn-rnn",
        kind="translator",
        options=CNNTranslatorOptions,
        build=cnn_translator,
        steps=RNNTranslatorSteps,
        learning_rate=2e-3,
        warmup_steps=200,
        schedule="cosine",
    )
)
