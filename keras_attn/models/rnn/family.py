"""The recurrent translator families: `rnn-plain`, `rnn-attention` and `rnn-luong`."""

from __future__ import annotations

from keras_attn.models.family import Family
from keras_attn.models.rnn.attention import rnn_attention_translator
from keras_attn.models.rnn.luong import rnn_luong_translator
from keras_attn.models.rnn.plain import rnn_plain_translator
from keras_attn.models.rnn.steps import RNNTranslatorSteps

RNN_OPTIONS = ("embedding_dim", "units", "cell", "gru_reset_after", "dropout", "num_layers")

# The training schedule `keras-attn train` uses where no tuning flag is given: Adam's 3e-3 (that of
# the tuned runs in docs/results.md) with 100 warm-up steps, decaying to 5 % at `--steps` (cosine):
# at the default 2,000 steps it beats the tuned runs' inverse-sqrt schedule, which suits a time
# budget (docs/results.md, "The command line's defaults").
RNN_TUNING = {"learning_rate": 3e-3, "warmup_steps": 100, "schedule": "cosine"}

RNN_PLAIN = Family(
    build=rnn_plain_translator,
    steps=RNNTranslatorSteps,
    hyperparameters=(*RNN_OPTIONS, "context_feeding"),
    **RNN_TUNING,
)
RNN_ATTENTION = Family(
    build=rnn_attention_translator,
    steps=RNNTranslatorSteps,
    hyperparameters=(*RNN_OPTIONS, "score"),
    **RNN_TUNING,
)
RNN_LUONG = Family(
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
)
