"""Functional-API builders for the sequence models of the papers cited in docs, and their
decoding views."""

from keras_attn import _serializables
from keras_attn.models.bart.model import (
    bart,
    bart_classifier,
    bart_translator,
    bart_translator_first_stage_variables,
)
from keras_attn.models.bert.bertsum import bertsum_translator
from keras_attn.models.bert.model import (
    bert,
    bert_classifier,
    bert_pretraining,
    bert_token_classifier,
)
from keras_attn.models.char_cnn import char_cnn
from keras_attn.models.families import ModelFamily
from keras_attn.models.family import (
    Family,
    get_family,
    load_model_file,
    register_family,
)
from keras_attn.models.gpt.model import gpt, gpt_classifier
from keras_attn.models.gpt.steps import GPTSteps
from keras_attn.models.han_classifier import han_attention_weights, han_classifier
from keras_attn.models.rnn.attention import rnn_attention_translator
from keras_attn.models.rnn.luong import rnn_luong_translator
from keras_attn.models.rnn.plain import rnn_plain_translator
from keras_attn.models.rnn.steps import (
    LuongTranslatorSteps,
    PlainTranslatorSteps,
    RNNTranslatorSteps,
)
from keras_attn.models.show_attend_tell.model import (
    ShowAttendTellDecoder,
    doubly_stochastic_penalty,
    show_attend_tell,
)
from keras_attn.models.show_attend_tell.steps import ShowAttendTellSteps
from keras_attn.models.text_cnn.model import text_cnn
from keras_attn.models.transformer.steps import (
    BartSteps,
    BertSumSteps,
    TransformerTranslatorSteps,
)
from keras_attn.models.transformer.translator import transformer_translator

__all__ = [
    "BartSteps",
    "BertSumSteps",
    "Family",
    "GPTSteps",
    "LuongTranslatorSteps",
    "ModelFamily",
    "PlainTranslatorSteps",
    "RNNTranslatorSteps",
    "ShowAttendTellDecoder",
    "ShowAttendTellSteps",
    "TransformerTranslatorSteps",
    "bart",
    "bart_classifier",
    "bart_translator",
    "bart_translator_first_stage_variables",
    "bert",
    "bert_classifier",
    "bert_pretraining",
    "bert_token_classifier",
    "bertsum_translator",
    "char_cnn",
    "doubly_stochastic_penalty",
    "get_family",
    "gpt",
    "gpt_classifier",
    "han_attention_weights",
    "han_classifier",
    "load_model_file",
    "register_family",
    "rnn_attention_translator",
    "rnn_luong_translator",
    "rnn_plain_translator",
    "show_attend_tell",
    "text_cnn",
    "transformer_translator",
]

_serializables.imported(__name__)
