"""Functional-API builders for the sequence models of the papers cited in docs, and their
decoding views.

Each public name is imported the first time it is used, so that importing a family's options
(`keras_attn.models.rnn.options`, which `keras-attn train` reads) imports neither Keras nor
TensorFlow.
"""

import sys
import types

from keras_attn import _lazy, _serializables

# Public name -> the module that defines it.
_EXPORTS = {
    "BartSteps": "keras_attn.models.transformer.steps",
    "BertSumSteps": "keras_attn.models.transformer.steps",
    "Family": "keras_attn.models.family",
    "GPTSteps": "keras_attn.models.gpt.steps",
    "LuongTranslatorSteps": "keras_attn.models.rnn.steps",
    "ModelFamily": "keras_attn.models.families",
    "PlainTranslatorSteps": "keras_attn.models.rnn.steps",
    "RNNLMSteps": "keras_attn.models.rnn_lm.steps",
    "RNNTranslatorSteps": "keras_attn.models.rnn.steps",
    "ShowAttendTellDecoder": "keras_attn.models.show_attend_tell.model",
    "ShowAttendTellSteps": "keras_attn.models.show_attend_tell.steps",
    "TransformerTranslatorSteps": "keras_attn.models.transformer.steps",
    "bart": "keras_attn.models.bart.model",
    "bart_classifier": "keras_attn.models.bart.model",
    "bart_token_classifier": "keras_attn.models.bart.model",
    "bart_translator": "keras_attn.models.bart.model",
    "bart_translator_first_stage_variables": "keras_attn.models.bart.model",
    "bert": "keras_attn.models.bert.model",
    "bert_classifier": "keras_attn.models.bert.model",
    "bert_pretraining": "keras_attn.models.bert.model",
    "bert_token_classifier": "keras_attn.models.bert.model",
    "bertsum_translator": "keras_attn.models.bert.bertsum",
    "char_cnn": "keras_attn.models.char_cnn",
    "doubly_stochastic_penalty": "keras_attn.models.show_attend_tell.model",
    "get_family": "keras_attn.models.families",
    "gpt": "keras_attn.models.gpt.model",
    "gpt_classifier": "keras_attn.models.gpt.model",
    "han_attention_weights": "keras_attn.models.han_classifier",
    "han_classifier": "keras_attn.models.han_classifier",
    "load_model_file": "keras_attn.models.families",
    "register_family": "keras_attn.models.families",
    "rnn_attention_translator": "keras_attn.models.rnn.attention",
    "rnn_lm": "keras_attn.models.rnn_lm.model",
    "rnn_luong_translator": "keras_attn.models.rnn.luong",
    "rnn_plain_translator": "keras_attn.models.rnn.plain",
    "show_attend_tell": "keras_attn.models.show_attend_tell.model",
    "text_cnn": "keras_attn.models.text_cnn.model",
    "transformer_translator": "keras_attn.models.transformer.translator",
    "vqa_coattention": "keras_attn.models.vqa.model",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = _lazy.lazy_names(__name__, _EXPORTS)


class _Models(types.ModuleType):
    """The package, whose builders keep their names when their folder of the same name is
    imported (`keras_attn.models.bart` is the builder, `keras_attn.models.bart.model` its
    module's)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return  # the import system naming a submodule: the builder stays
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Models


_serializables.imported(__name__)
