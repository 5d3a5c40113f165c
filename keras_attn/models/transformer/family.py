"""The `transformer` family, and what every family on a Transformer backbone shares: its
training schedules and the builders of a classifier or tagger head on a
backbone."""

from __future__ import annotations

from collections.abc import Callable

import keras

from keras_attn.models.family import Family
from keras_attn.models.transformer.options import TransformerTranslatorOptions
from keras_attn.models.transformer.steps import TransformerTranslatorSteps
from keras_attn.models.transformer.translator import transformer_translator

# The training schedules `keras-attn train` uses where no tuning flag is given: the peak rates of
# the tuned runs in docs/results.md, decaying to 5 % at `--steps` (cosine), which at the default
# 2,000 steps beats their inverse-sqrt schedule (docs/results.md, "The command line's defaults").
# The Transformers (and their pre-training) at Adam's 1e-3 with 100 warm-up steps; the families
# fine-tuned from a pre-trained run at 5e-4 with 30.
TRANSFORMER_TUNING = {"learning_rate": 1e-3, "warmup_steps": 100, "schedule": "cosine"}
FINE_TUNING = {"learning_rate": 5e-4, "warmup_steps": 30, "schedule": "cosine"}


def headed(backbone: Callable[..., keras.Model], head: Callable[..., keras.Model], what: str):
    """A builder `(vocabulary_size, num_outputs, num_layers, d_model, num_heads, ff_dim,
    dropout, **backbone_options)` of `head(backbone(...), num_outputs)`.

    The builder belongs to `head`'s module (its `__module__`): a family's builder is found in
    the folder of the model it builds.
    """

    def build(
        vocabulary_size: int,
        num_outputs: int,
        num_layers: int = 2,
        d_model: int = 128,
        num_heads: int = 4,
        ff_dim: int = 512,
        dropout: float = 0.1,
        **backbone_options,
    ) -> keras.Model:
        model = backbone(
            vocabulary_size, num_layers=num_layers, d_model=d_model, num_heads=num_heads,
            ff_dim=ff_dim, dropout=dropout, **backbone_options,
        )  # fmt: skip
        return head(model, num_outputs, dropout=dropout)

    build.__doc__ = what
    build.__module__ = head.__module__
    return build


def classifier_family(build: Callable[..., keras.Model], backbone: str, options: type) -> Family:
    """A sequence classifier on a pre-trainable Transformer backbone with `options`."""
    return Family(
        build=build,
        steps=None,
        options=options,
        task="classification",
        backbone=backbone,
        **FINE_TUNING,
    )


def pre_training_family(
    build: Callable[..., keras.Model],
    task: str,
    backbone: str,
    options: type,
    steps: Callable | None = None,
) -> Family:
    """A pre-trainable Transformer `backbone` with `options` trained on `task`; its step view,
    if any, sized to the decoding length."""
    return Family(
        build=build,
        steps=steps,
        sized_steps=steps is not None,
        options=options,
        task=task,
        backbone=backbone,
        **TRANSFORMER_TUNING,
    )


TRANSFORMER = Family(
    build=transformer_translator,
    steps=TransformerTranslatorSteps,
    options=TransformerTranslatorOptions,
    sized_steps=True,
    **TRANSFORMER_TUNING,
)
