"""The `text-cnn` family: a convolutional sentence classifier trained from scratch."""

from __future__ import annotations

from keras_attn.models.family import Family
from keras_attn.models.text_cnn.model import text_cnn
from keras_attn.models.text_cnn.options import TextCNNOptions

TEXT_CNN = Family(
    build=text_cnn,
    options=TextCNNOptions,
    task="classification",
    backbone="none",
    # Adam at 1e-3 as in the text-classification comparison of docs/results.md.
    learning_rate=1e-3,
    warmup_steps=0,
)
