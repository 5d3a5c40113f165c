"""Functional-API builders for the sequence models of the papers cited in docs, and their
decoding views."""

from keras_attn import _serializables
from keras_attn.models.bart import (
    bart,
    bart_classifier,
    bart_translator,
    bart_translator_first_stage_variables,
)
from keras_attn.models.bert import (
    bert,
    bert_classifier,
    bert_pretraining,
    bert_token_classifier,
)
from keras_attn.models.bertsum import bertsum_translator
from keras_attn.models.char_cnn import char_cnn
from keras_attn.models.families import ModelFamily
from keras_attn.models.family import (
    Family,
    get_family,
    load_model_file,
    register_family,
)
from keras_attn.models.gpt import gpt, gpt_classifier
from keras_attn.models.gpt_steps import GPTSteps
from keras_attn.models.han_classifier import han_attention_weights, han_classifier
from keras_attn.models.rnn_luong_translator import rnn_luong_translator
from keras_attn.models.rnn_plain_translator import rnn_plain_translator
from keras_attn.models.rnn_translator import rnn_attention_translator
from keras_attn.models.rnn_translator_steps import (
    LuongTranslatorSteps,
    PlainTranslatorSteps,
    RNNTranslatorSteps,
)
from keras_attn.models.show_attend_tell import (
    ShowAttendTellDecoder,
    doubly_stochastic_penalty,
    show_attend_tell,
)
from keras_attn.models.show_attend_tell_steps import ShowAttendTellSteps
from keras_attn.models.text_cnn import text_cnn
from keras_attn.models.transformer_translator import transformer_translator
from keras_attn.models.transformer_translator_steps import (
    BartSteps,
    BertSumSteps,
    TransformerTranslatorSteps,
)

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
