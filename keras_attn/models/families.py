"""The built-in model families that `train` builds and `keras-attn export` exports.

Each is a `keras_attn.models.Family` (see `keras_attn.models.family`) defined in its model's
folder (`keras_attn/models/<model>/family.py`, beside the builder and the step-contract view for
decoding: `encode`/`step` for a translator, `prefill`/`step` for a language model). Importing
this module registers them in `MODEL_FAMILIES`, beside the families registered with
`register_family`.
"""

from __future__ import annotations

import dataclasses

from keras_attn.models.bart.family import (
    BART,
    BART_CLASSIFIER,
    BART_TAGGER,
    BART_TRANSLATOR,
    bart_classifier_model,  # noqa: F401  (re-exported)
    bart_tagger_model,  # noqa: F401  (re-exported)
)
from keras_attn.models.bert.family import (  # noqa: F401  (re-exported)
    BERT,
    BERT_CLASSIFIER,
    BERT_SEGMENTS,
    BERT_TAGGER,
    BERTSUM,
    bert_classifier_model,
    bert_pretraining_model,
    bert_tagger_model,
    bertsum_model,
)
from keras_attn.models.family import (  # noqa: F401  (re-exported)
    MODEL_FAMILIES,
    Family,
    get_family,
    load_model_file,
    register_family,
)
from keras_attn.models.gpt.family import (
    GPT,
    GPT_CLASSIFIER,
    gpt_classifier_model,  # noqa: F401  (re-exported)
)
from keras_attn.models.rnn.family import (
    RNN_ATTENTION,
    RNN_LUONG,
    RNN_PLAIN,
    RNN_TUNING,  # noqa: F401  (re-exported)
)
from keras_attn.models.rnn_lm.family import RNN_LM
from keras_attn.models.show_attend_tell.family import SHOW_ATTEND_TELL
from keras_attn.models.text_cnn.family import TEXT_CNN
from keras_attn.models.transformer.family import (  # noqa: F401  (re-exported)
    FINE_TUNING,
    TRANSFORMER,
    TRANSFORMER_TUNING,
)
from keras_attn.models.vqa.family import VQA_COATTENTION

# The name the model families had before `Family` was public: the same class.
ModelFamily = Family

BUILT_IN_FAMILIES: dict[str, Family] = {
    "rnn-plain": RNN_PLAIN,
    "rnn-attention": RNN_ATTENTION,
    "rnn-luong": RNN_LUONG,
    "transformer": TRANSFORMER,
    "gpt": GPT,
    "rnn-lm": RNN_LM,
    "show-attend-tell": SHOW_ATTEND_TELL,
    "bert": BERT,
    "bart": BART,
    "bart-translator": BART_TRANSLATOR,
    "bertsum": BERTSUM,
    "bert-classifier": BERT_CLASSIFIER,
    "gpt-classifier": GPT_CLASSIFIER,
    "bart-classifier": BART_CLASSIFIER,
    "text-cnn": TEXT_CNN,
    "bert-tagger": BERT_TAGGER,
    "bart-tagger": BART_TAGGER,
    "vqa-coattention": VQA_COATTENTION,
}


MODEL_FAMILIES.update(
    {name: dataclasses.replace(family, name=name) for name, family in BUILT_IN_FAMILIES.items()}
)
# `cnn-rnn` registers itself, after the families above.
from keras_attn.models.cnn_rnn import family as _cnn_rnn  # noqa: E402, F401
