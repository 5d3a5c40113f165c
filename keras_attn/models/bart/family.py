"""The `bart` (pre-training: denoising), `bart-translator`, `bart-classifier` and `bart-tagger`
families."""

from __future__ import annotations

from keras_attn.models.bart.model import (
    bart,
    bart_classifier,
    bart_token_classifier,
    bart_translator,
)
from keras_attn.models.bart.options import BARTOptions, BARTTranslatorOptions
from keras_attn.models.family import Family
from keras_attn.models.transformer.family import (
    FINE_TUNING,
    classifier_family,
    headed,
    pre_training_family,
)
from keras_attn.models.transformer.steps import TransformerTranslatorSteps

bart_classifier_model = headed(bart, bart_classifier, "`bart_classifier` on a `bart`.")
bart_tagger_model = headed(bart, bart_token_classifier, "`bart_token_classifier` on a `bart`.")


def _new_source_encoder(options: dict) -> bool:
    return bool(options.get("new_source_encoder_layers"))


BART = pre_training_family(bart, "denoising", "bart", BARTOptions, steps=TransformerTranslatorSteps)
BART_TRANSLATOR = Family(
    build=bart_translator,
    steps=TransformerTranslatorSteps,
    options=BARTTranslatorOptions,
    sized_steps=True,
    # The plain fine-tune keeps BART's one vocabulary on both sides; a new source encoder
    # reads a source vocabulary of its own.
    shares_vocabulary=lambda hp: not _new_source_encoder(hp),
    vocabulary_origin=lambda hp: (
        {"target": "single"}
        if _new_source_encoder(hp)
        else {"source": "single", "target": "single"}
    ),
    backbone="bart",
    **FINE_TUNING,
)
BART_CLASSIFIER = classifier_family(bart_classifier_model, "bart", BARTOptions)
BART_TAGGER = Family(
    build=bart_tagger_model,
    options=BARTOptions,
    task="tagging",
    backbone="bart",
    **FINE_TUNING,
)
