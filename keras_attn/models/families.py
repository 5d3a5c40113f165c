"""The built-in model families that `train` builds and `keras-attn export` exports.

Each is a `keras_attn.models.Family` (see `keras_attn.models.family`): a model builder with its
step-contract view for decoding (`encode`/`step` for a translator, `prefill`/`step` for a
language model) and the `TrainConfig` fields the builder takes. Importing this module registers
them in `MODEL_FAMILIES`, beside the families registered with `register_family`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import keras

from keras_attn.models.bart import bart, bart_classifier, bart_translator
from keras_attn.models.bert import bert, bert_classifier, bert_pretraining, bert_token_classifier
from keras_attn.models.bertsum import BERTSUM_ENCODER_LAYERS, bertsum_translator
from keras_attn.models.family import (  # noqa: F401  (re-exported)
    MODEL_FAMILIES,
    Family,
    get_family,
    load_model_file,
    register_family,
)
from keras_attn.models.gpt import gpt, gpt_classifier
from keras_attn.models.gpt_steps import GPTSteps
from keras_attn.models.rnn_luong_translator import rnn_luong_translator
from keras_attn.models.rnn_plain_translator import rnn_plain_translator
from keras_attn.models.rnn_translator import rnn_attention_translator
from keras_attn.models.rnn_translator_steps import RNNTranslatorSteps
from keras_attn.models.show_attend_tell import show_attend_tell
from keras_attn.models.show_attend_tell_steps import ShowAttendTellSteps
from keras_attn.models.text_cnn import text_cnn
from keras_attn.models.transformer_translator import transformer_translator
from keras_attn.models.transformer_translator_steps import TransformerTranslatorSteps

# The name the model families had before `Family` was public: the same class.
ModelFamily = Family


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


def _headed(backbone: Callable[..., keras.Model], head: Callable[..., keras.Model], what: str):
    """A builder `(vocabulary_size, num_outputs, num_layers, d_model, num_heads, ff_dim,
    dropout, **backbone_options)` of `head(backbone(...), num_outputs)`."""

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
    return build


def _bert_backbone(vocabulary_size: int, **options) -> keras.Model:
    return bert(vocabulary_size, num_segments=BERT_SEGMENTS, **options)


bert_classifier_model = _headed(
    _bert_backbone, bert_classifier, "`bert_classifier` on a two-segment `bert` (the layers of "
    "`bert_pretraining_model`)."
)  # fmt: skip
bert_tagger_model = _headed(
    _bert_backbone, bert_token_classifier, "`bert_token_classifier` on a two-segment `bert`."
)
# `gpt_classifier_model(..., max_length=positions)`: as many positions as the language model.
gpt_classifier_model = _headed(gpt, gpt_classifier, "`gpt_classifier` on a `gpt`.")
bart_classifier_model = _headed(bart, bart_classifier, "`bart_classifier` on a `bart`.")


# `bertsum_translator` whose encoder has the layers of `bert_pretraining_model`.
bertsum_model = functools.partial(bertsum_translator, num_segments=BERT_SEGMENTS)


def _new_source_encoder(hyperparameters: dict) -> bool:
    return bool(hyperparameters.get("new_source_encoder_layers"))


TRANSFORMER_OPTIONS = ("num_layers", "d_model", "num_heads", "ff_dim", "dropout")
RNN_OPTIONS = ("embedding_dim", "units", "cell", "gru_reset_after", "dropout", "num_layers")


# The training schedules `keras-attn train` uses where no tuning flag is given: those of the tuned
# runs in docs/results.md. The RNN translators at Adam's 3e-3 and the Transformers (and their
# pre-training) at 1e-3, both on the inverse-sqrt schedule with 100 warm-up steps, which does not
# depend on the step target (a time budget leaves it unknown); the families fine-tuned from a
# pre-trained run at 5e-4, cosine, 30 warm-up steps.
RNN_TUNING = {"learning_rate": 3e-3, "warmup_steps": 100, "schedule": "inverse-sqrt"}
TRANSFORMER_TUNING = {"learning_rate": 1e-3, "warmup_steps": 100, "schedule": "inverse-sqrt"}
FINE_TUNING = {"learning_rate": 5e-4, "warmup_steps": 30, "schedule": "cosine"}


def _classifier_family(build: Callable[..., keras.Model], backbone: str) -> ModelFamily:
    """A sequence classifier on a pre-trainable Transformer backbone."""
    return ModelFamily(
        build=build,
        steps=None,
        hyperparameters=TRANSFORMER_OPTIONS,
        task="classification",
        backbone=backbone,
        **FINE_TUNING,
    )


def _pre_training_family(
    build: Callable[..., keras.Model], task: str, backbone: str, steps: Callable | None = None
) -> ModelFamily:
    """A pre-trainable Transformer `backbone` trained on `task`; its step view, if any, sized to
    the decoding length."""
    return ModelFamily(
        build=build,
        steps=steps,
        sized_steps=steps is not None,
        hyperparameters=TRANSFORMER_OPTIONS,
        task=task,
        backbone=backbone,
        **TRANSFORMER_TUNING,
    )


BUILT_IN_FAMILIES: dict[str, ModelFamily] = {
    "rnn-plain": ModelFamily(
        build=rnn_plain_translator,
        steps=RNNTranslatorSteps,
        hyperparameters=(*RNN_OPTIONS, "context_feeding"),
        **RNN_TUNING,
    ),
    "rnn-attention": ModelFamily(
        build=rnn_attention_translator,
        steps=RNNTranslatorSteps,
        hyperparameters=(*RNN_OPTIONS, "score"),
        **RNN_TUNING,
    ),
    "rnn-luong": ModelFamily(
        build=rnn_luong_translator,
        steps=RNNTranslatorSteps,
        hyperparameters=(
            *RNN_OPTIONS,
            "score",
            "distribution",
            "attention",
            "window",
            "input_feeding",
            "position_gradient_scale",
        ),
        attentions=("global", "local-m", "local-p"),
        **RNN_TUNING,
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
        **TRANSFORMER_TUNING,
    ),
    "gpt": _pre_training_family(gpt, "language_model", "gpt", steps=GPTSteps),
    "show-attend-tell": ModelFamily(
        build=show_attend_tell,
        steps=ShowAttendTellSteps,
        hyperparameters=("embedding_dim", "units", "dropout", "attention", "penalty"),
        task="captioning",
        attentions=("soft", "hard"),
    ),
    "bert": _pre_training_family(bert_pretraining_model, "masked_lm", "bert"),
    "bart": _pre_training_family(bart, "denoising", "bart", steps=TransformerTranslatorSteps),
    "bart-translator": ModelFamily(
        build=bart_translator,
        steps=TransformerTranslatorSteps,
        hyperparameters=(*TRANSFORMER_OPTIONS, "new_source_encoder_layers"),
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
    ),
    "bertsum": ModelFamily(
        build=bertsum_model,
        steps=TransformerTranslatorSteps,
        hyperparameters=(*TRANSFORMER_OPTIONS, "decoder_layers"),
        sized_steps=True,
        vocabulary_origin=lambda hp: {"source": "single"},
        encoder_layers=BERTSUM_ENCODER_LAYERS,
        backbone="bert",
        **FINE_TUNING,
    ),
    "bert-classifier": _classifier_family(bert_classifier_model, "bert"),
    "gpt-classifier": _classifier_family(gpt_classifier_model, "gpt"),
    "bart-classifier": _classifier_family(bart_classifier_model, "bart"),
    "text-cnn": ModelFamily(
        build=text_cnn,
        steps=None,
        hyperparameters=("embedding_dim", "dropout"),
        task="classification",
        backbone="none",
        # Adam at 1e-3 as in the text-classification comparison of docs/results.md.
        learning_rate=1e-3,
        warmup_steps=0,
    ),
    "bert-tagger": ModelFamily(
        build=bert_tagger_model,
        steps=None,
        hyperparameters=TRANSFORMER_OPTIONS,
        task="tagging",
        backbone="bert",
        **FINE_TUNING,
    ),
}


MODEL_FAMILIES.update(
    {name: dataclasses.replace(family, name=name) for name, family in BUILT_IN_FAMILIES.items()}
)
from keras_attn.models import cnn_translator  # noqa: E402, F401  (registers cnn-rnn after these)
