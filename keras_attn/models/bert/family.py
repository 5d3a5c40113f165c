"""The `bert` (pre-training: masked LM and next-sentence prediction), `bert-classifier`,
`bert-tagger` and `bertsum` families."""

from __future__ import annotations

import functools

import keras

from keras_attn.models.bert.bertsum import BERTSUM_ENCODER_LAYERS, bertsum_translator
from keras_attn.models.bert.model import (
    bert,
    bert_classifier,
    bert_pretraining,
    bert_token_classifier,
)
from keras_attn.models.bert.options import BERTOptions, BertSumOptions
from keras_attn.models.family import Family
from keras_attn.models.transformer.family import (
    FINE_TUNING,
    classifier_family,
    headed,
    pre_training_family,
)
from keras_attn.models.transformer.steps import TransformerTranslatorSteps

# BERT runs pack sentence pairs: their models have two segment embeddings (Devlin et al., 2018).
BERT_SEGMENTS = 2


def bert_pretraining_model(
    vocabulary_size: int,
    num_layers: int = 2,
    d_model: int = 128,
    num_heads: int = 4,
    ff_dim: int = 512,
    dropout: float = 0.1,
) -> keras.Model:
    """`bert_pretraining` on a two-segment `bert`: masked LM + next-sentence prediction."""
    return bert_pretraining(
        _bert_backbone(
            vocabulary_size,
            num_layers=num_layers,
            d_model=d_model,
            num_heads=num_heads,
            ff_dim=ff_dim,
            dropout=dropout,
        )  # fmt: skip
    )


def _bert_backbone(vocabulary_size: int, **options) -> keras.Model:
    return bert(vocabulary_size, num_segments=BERT_SEGMENTS, **options)


bert_classifier_model = headed(
    _bert_backbone, bert_classifier, "`bert_classifier` on a two-segment `bert` (the layers of "
    "`bert_pretraining_model`)."
)  # fmt: skip
bert_tagger_model = headed(
    _bert_backbone, bert_token_classifier, "`bert_token_classifier` on a two-segment `bert`."
)

# `bertsum_translator` whose encoder has the layers of `bert_pretraining_model`.
bertsum_model = functools.partial(bertsum_translator, num_segments=BERT_SEGMENTS)

BERT = pre_training_family(bert_pretraining_model, "masked_lm", "bert", BERTOptions)
BERTSUM = Family(
    build=bertsum_model,
    steps=TransformerTranslatorSteps,
    options=BertSumOptions,
    sized_steps=True,
    vocabulary_origin=lambda hp: {"source": "single"},
    encoder_layers=BERTSUM_ENCODER_LAYERS,
    backbone="bert",
    **FINE_TUNING,
)
BERT_CLASSIFIER = classifier_family(bert_classifier_model, "bert", BERTOptions)
BERT_TAGGER = Family(
    build=bert_tagger_model,
    steps=None,
    options=BERTOptions,
    task="tagging",
    backbone="bert",
    **FINE_TUNING,
)
