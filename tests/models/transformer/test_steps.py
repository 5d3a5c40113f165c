"""`TransformerTranslatorSteps`: one cached step view for `transformer_translator`, `bart`,
`bart_translator` and `bertsum_translator`, found by layer name; `training=True` turns the
model's dropout on."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.errors import ConfigError
from keras_attn.models import (
    BartSteps,
    BertSumSteps,
    TransformerTranslatorSteps,
    bart,
    bart_translator,
    bertsum_translator,
    gpt,
    transformer_translator,
)
from tests.lazy_tf import tf

VOCAB = 30
SOURCE = np.array([[5, 6, 7, 8, 0], [9, 4, 0, 0, 0]], "int32")
TARGET = np.array([[2, 11, 12, 13], [2, 14, 15, 0]], "int32")
SIZES = dict(num_layers=1, d_model=8, num_heads=2, ff_dim=16)
KINDS = ["transformer", "transformer-shared", "bart", "bart-new-source-encoder", "bertsum"]


def build(kind: str, dropout: float) -> keras.Model:
    keras.utils.set_random_seed(0)
    settings = dict(SIZES, dropout=dropout)
    if kind.startswith("transformer"):
        shared = kind == "transformer-shared"
        return transformer_translator(VOCAB, VOCAB, share_embeddings=shared, **settings)
    if kind == "bart":
        return bart(VOCAB, max_length=10, **settings)
    if kind == "bart-new-source-encoder":
        return bart_translator(VOCAB, VOCAB, new_source_encoder_layers=1, max_length=10, **settings)
    return bertsum_translator(VOCAB, VOCAB, max_length=10, num_segments=2, **settings)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("kind", KINDS)
def test_cached_steps_equal_the_teacher_forced_pass(kind):
    model = build(kind, dropout=0.0)
    full = ops.convert_to_numpy(model({"source_ids": SOURCE, "target_ids": TARGET}))
    steps = TransformerTranslatorSteps(model, max_length=TARGET.shape[1])
    state = steps.encode(SOURCE)
    for t in range(TARGET.shape[1]):
        logits, state = steps.step(tf.constant(TARGET[:, t]), state)
        real = TARGET[:, t] != 0
        np.testing.assert_allclose(
            ops.convert_to_numpy(logits)[real], full[real, t], rtol=1e-5, atol=1e-5
        )


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("kind", KINDS)
def test_training_true_applies_the_models_dropout(kind):
    model = build(kind, dropout=0.5)
    tokens = tf.constant(TARGET[:, 0])

    def two_steps(steps, **call):
        state = steps.encode(SOURCE, **call)
        return [ops.convert_to_numpy(steps.step(tokens, state, **call)[0]) for _ in range(2)]

    first, second = two_steps(TransformerTranslatorSteps(model, max_length=4, training=True))
    assert np.abs(first - second).max() > 1e-3
    first, second = two_steps(TransformerTranslatorSteps(model, max_length=4))
    np.testing.assert_array_equal(first, second)
    first, second = two_steps(TransformerTranslatorSteps(model, max_length=4), training=True)
    assert np.abs(first - second).max() > 1e-3


def test_the_family_names_are_one_view_and_bad_arguments_are_config_errors():
    assert BartSteps is TransformerTranslatorSteps is BertSumSteps
    with pytest.raises(ConfigError, match=r"max_length in \[1, 10\].*max_length=11") as caught:
        BartSteps(build("bart", dropout=0.0), max_length=11)
    assert caught.value.fields == ("max_length",)
    with pytest.raises(ConfigError, match="Expected a positive max_length. Received: max_length=0"):
        TransformerTranslatorSteps(build("transformer", dropout=0.0), max_length=0)
    with pytest.raises(ConfigError, match="has no layer named 'encoder'"):
        TransformerTranslatorSteps(gpt(VOCAB, max_length=10, **SIZES), max_length=4)
