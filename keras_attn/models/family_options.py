"""The options dataclass of each built-in model family, by the family's name.

`keras-attn train` builds a built-in family's flags from this table, and a run directory written
before the families had options dataclasses is read with it, without importing the families
(and Keras with them): this module and the options modules it names import neither TensorFlow
nor Keras. A test checks it against `keras_attn.models.families.MODEL_FAMILIES`.
"""

from __future__ import annotations

from keras_attn.models.bart.options import BARTOptions, BARTTranslatorOptions
from keras_attn.models.bert.options import BERTOptions, BertSumOptions
from keras_attn.models.cnn_rnn.options import CNNTranslatorOptions
from keras_attn.models.gpt.options import GPTOptions
from keras_attn.models.rnn.options import RNNAttentionOptions, RNNLuongOptions, RNNPlainOptions
from keras_attn.models.show_attend_tell.options import ShowAttendTellOptions
from keras_attn.models.text_cnn.options import TextCNNOptions
from keras_attn.models.transformer.options import TransformerTranslatorOptions

BUILT_IN_OPTIONS: dict[str, type] = {
    "rnn-plain": RNNPlainOptions,
    "rnn-attention": RNNAttentionOptions,
    "rnn-luong": RNNLuongOptions,
    "transformer": TransformerTranslatorOptions,
    "gpt": GPTOptions,
    "show-attend-tell": ShowAttendTellOptions,
    "bert": BERTOptions,
    "bart": BARTOptions,
    "bart-translator": BARTTranslatorOptions,
    "bertsum": BertSumOptions,
    "bert-classifier": BERTOptions,
    "gpt-classifier": GPTOptions,
    "bart-classifier": BARTOptions,
    "text-cnn": TextCNNOptions,
    "bert-tagger": BERTOptions,
    "bart-tagger": BARTOptions,
    "cnn-rnn": CNNTranslatorOptions,
}
