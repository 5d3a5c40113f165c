"""`RNNTranslatorSteps`: one step view for the three RNN translators and the Show, Attend and Tell
captioner; `training=True` runs the layers (dropout included) as the teacher-forced training
pass does."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.models import (
    LuongTranslatorSteps,
    PlainTranslatorSteps,
    RNNTranslatorSteps,
    ShowAttendTellSteps,
    rnn_attention_translator,
    rnn_luong_translator,
    rnn_plain_translator,
    show_attend_tell,
)
from tests.lazy_tf import tf

SOURCE = np.array([[5, 6, 7, 8, 0], [9, 4, 0, 0, 0]], "int32")
TARGET = np.array([[2, 11, 12, 13], [2, 14, 0, 0]], "int32")
IMAGES = np.random.default_rng(0).integers(0, 256, size=(2, 16, 16, 3)).astype("uint8")
KINDS = ["attention", "luong", "plain", "show-attend-tell"]


def build(kind: str, dropout: float) -> keras.Model:
    keras.utils.set_random_seed(0)
    if kind == "show-attend-tell":
        return show_attend_tell(
            20, 16, embedding_dim=6, units=8, encoder_filters=(4, 4), dropout=dropout
        )
    builder = {
        "attention": rnn_attention_translator,
        "luong": rnn_luong_translator,
        "plain": rnn_plain_translator,
    }[kind]
    return builder(20, 20, embedding_dim=6, units=8, dropout=dropout)


def inputs_of(kind: str):
    """`(model inputs, what encode reads)` of the teacher-forced batch."""
    if kind == "show-attend-tell":
        return {"images": IMAGES, "target_ids": TARGET}, IMAGES
    return {"source_ids": SOURCE, "target_ids": TARGET}, SOURCE


def logits_of(outputs):
    return ops.convert_to_numpy(outputs["logits"] if isinstance(outputs, dict) else outputs)


def stepped_logits(steps, encoded) -> np.ndarray:
    """The logits `(batch, T_y, V)` of stepping the gold target through `steps`."""
    state = steps.encode(encoded)
    logits = []
    for t in range(TARGET.shape[1]):
        logits_t, state = steps.step(tf.constant(TARGET[:, t]), state)
        logits.append(ops.convert_to_numpy(logits_t))
    return np.stack(logits, axis=1)


@pytest.mark.parametrize("kind", KINDS)
def test_stepping_the_gold_target_is_teacher_forcing_in_either_mode(kind):
    model = build(kind, dropout=0.0)
    features, encoded = inputs_of(kind)
    real = TARGET != 0
    for training in (False, True):
        expected = logits_of(model(features, training=training))
        got = stepped_logits(RNNTranslatorSteps(model, training=training), encoded)
        np.testing.assert_allclose(got[real], expected[real], rtol=1e-5, atol=1e-6)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("kind", KINDS)
def test_training_true_applies_the_models_dropout(kind):
    model = build(kind, dropout=0.5)
    _, encoded = inputs_of(kind)
    tokens = tf.constant(TARGET[:, 1])

    def two_steps(steps, **call):
        state = steps.encode(encoded, **call)
        return [ops.convert_to_numpy(steps.step(tokens, state, **call)[0]) for _ in range(2)]

    first, second = two_steps(RNNTranslatorSteps(model, training=True))
    assert np.abs(first - second).max() > 1e-3  # fresh dropout masks on every call
    first, second = two_steps(RNNTranslatorSteps(model))
    np.testing.assert_array_equal(first, second)
    # A call's `training` overrides the view's.
    first, second = two_steps(RNNTranslatorSteps(model), training=True)
    assert np.abs(first - second).max() > 1e-3
    first, second = two_steps(RNNTranslatorSteps(model, training=True), training=False)
    np.testing.assert_array_equal(first, second)


def test_the_family_names_are_one_view():
    assert LuongTranslatorSteps is RNNTranslatorSteps is PlainTranslatorSteps
    model = build("show-attend-tell", dropout=0.0)
    steps = ShowAttendTellSteps(model, training=True)
    assert type(steps) is RNNTranslatorSteps and steps.training
    assert steps.grid_shape == (4, 4)
    assert RNNTranslatorSteps(build("plain", dropout=0.0)).grid_shape is None
