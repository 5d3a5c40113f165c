"""The `gpt` (pre-training: language modelling) and `gpt-classifier` families."""

from __future__ import annotations

from keras_attn.models.gpt.model import gpt, gpt_classifier
from keras_attn.models.gpt.options import GPTOptions
from keras_attn.models.gpt.steps import GPTSteps
from keras_attn.models.transformer.family import (
    classifier_family,
    headed,
    pre_training_family,
)

# `gpt_classifier_model(..., max_length=positions)`: as many positions as the language model.
gpt_classifier_model = headed(gpt, gpt_classifier, "`gpt_classifier` on a `gpt`.")

GPT = pre_training_family(gpt, "language_model", "gpt", GPTOptions, steps=GPTSteps)
GPT_CLASSIFIER = classifier_family(gpt_classifier_model, "gpt", GPTOptions)
