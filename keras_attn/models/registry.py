"""Named model families the CLI trains and exports: builder + step-contract view."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import keras

from keras_attn.models.luong_translator_steps import LuongTranslatorSteps
from keras_attn.models.rnn_luong_translator import rnn_luong_translator
from keras_attn.models.rnn_translator import rnn_attention_translator
from keras_attn.models.rnn_translator_steps import RNNTranslatorSteps
from keras_attn.models.transformer_translator import transformer_translator
from keras_attn.models.transformer_translator_steps import TransformerTranslatorSteps


@dataclass(frozen=True)
class ModelFamily:
    """How to build a model of this family and how to decode with it.

    `hyperparameters` are the `TrainConfig` fields passed to `build` as keyword arguments; a field
    left at None is not passed, so the builder's default applies.
    """

    build: Callable[..., keras.Model]
    steps: Callable[..., object]
    hyperparameters: tuple[str, ...]
    # Whether `steps(model, max_length=...)` preallocates caches for `max_length` tokens.
    sized_steps: bool = False

    def decoding_steps(self, model: keras.Model, max_length: int) -> object:
        """The step-contract view of `model` for decoding loops of at most `max_length` tokens."""
        if self.sized_steps:
            return self.steps(model, max_length=max_length)
        return self.steps(model)


MODEL_FAMILIES: dict[str, ModelFamily] = {
    "rnn-attention": ModelFamily(
        build=rnn_attention_translator,
        steps=RNNTranslatorSteps,
        hyperparameters=("embedding_dim", "units", "cell", "dropout", "score"),
    ),
    "rnn-luong": ModelFamily(
        build=rnn_luong_translator,
        steps=LuongTranslatorSteps,
        hyperparameters=(
            "embedding_dim",
            "units",
            "cell",
            "dropout",
            "score",
            "distribution",
            "attention",
            "window",
            "input_feeding",
        ),
    ),
    "transformer": ModelFamily(
        build=transformer_translator,
        steps=TransformerTranslatorSteps,
        hyperparameters=(
            "num_layers",
            "d_model",
            "num_heads",
            "ff_dim",
            "dropout",
            "normalize_first",
        ),
        sized_steps=True,
    ),
}


def get_family(name: str) -> ModelFamily:
    """The family called `name`; a ValueError naming the choices otherwise."""
    if name not in MODEL_FAMILIES:
        raise ValueError(f"Unknown model {name!r}. Expected one of: {', '.join(MODEL_FAMILIES)}")
    return MODEL_FAMILIES[name]
