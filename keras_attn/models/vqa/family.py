"""The `vqa-coattention` family: a visual question answerer with parallel co-attention."""

from __future__ import annotations

from keras_attn.models.family import Family
from keras_attn.models.vqa.model import vqa_coattention
from keras_attn.models.vqa.options import VQACoAttentionOptions

VQA_COATTENTION = Family(
    build=vqa_coattention,
    options=VQACoAttentionOptions,
    task="question_answering",
    learning_rate=3e-3,
    warmup_steps=50,
)
