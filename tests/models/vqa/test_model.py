"""The parallel co-attention answerer: its head against NumPy with the model's weights, masking,
the layer harness and saving."""

import keras
import numpy as np
import pytest

from keras_attn.models.vqa.model import (
    CO_ATTENTION,
    QUESTION_ENCODER,
    REGION_FEATURES,
    ParallelCoAttention,
    vqa_coattention,
)
from keras_attn.testing import run_layer_test

RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(3, 16, 16, 3)).astype("uint8")
QUESTIONS = np.array([[4, 5, 6, 7], [8, 9, 0, 0], [10, 0, 0, 0]], "int32")
SMALL = {"embedding_dim": 5, "units": 6, "attention_units": 4, "encoder_filters": (4, 6)}
V = RNG.normal(size=(2, 9, 5)).astype("float32")
Q = RNG.normal(size=(2, 4, 3)).astype("float32")
Q_MASK = np.array([[True] * 4, [True, True, False, False]])


def small_model():
    model = vqa_coattention(12, 7, 16, dropout=0.0, **SMALL)
    # Random values in every weight, biases included, so no term of the equations hides at 0;
    # large w_hv and w_hq, so the weights are far from uniform.
    rng = np.random.default_rng(1)
    for weight in model.weights:
        scale = 0.2 if "conv_" in weight.path else 4.0 if "_score/" in weight.path else 0.7
        weight.assign(rng.normal(scale=scale, size=weight.shape).astype("float32"))
    return model


def softmax(x, mask=None):
    """Softmax over the last axis; masked entries get 0 (a fully masked row is all 0)."""
    x = np.where(mask, x, -np.inf) if mask is not None else x
    top = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def numpy_head(layer, joint, answer, regions, words, mask):
    """Lu et al.'s parallel co-attention (eq. 3-4, the affinity normalised by a softmax each
    way) and the answer layer (eq. 7-8) in NumPy, with the Keras layers' weights."""
    w_b = np.asarray(layer.co_attention.score_fn.kernel)  # (d_v, d_q)
    w_v = np.asarray(layer.region_projection.kernel)
    w_q = np.asarray(layer.word_projection.kernel)
    w_hv = np.asarray(layer.region_score.kernel)[:, 0]
    w_hq = np.asarray(layer.word_score.kernel)[:, 0]
    affinity = np.einsum("bld,de,bte->blt", regions, w_b, words)  # C (batch, L, T)
    pairs = np.broadcast_to(mask[:, None, :], affinity.shape)
    a_v_words = softmax(affinity, pairs)  # each region over the words
    a_q_regions = softmax(affinity.transpose(0, 2, 1), pairs.transpose(0, 2, 1))  # (b, T, L)
    region_map = np.tanh(regions @ w_v + (a_v_words @ words) @ w_q)  # H^v (batch, L, k)
    word_map = np.tanh(words @ w_q + (a_q_regions @ regions) @ w_v)  # H^q (batch, T, k)
    a_v = softmax(region_map @ w_hv)  # (batch, L)
    a_q = softmax(word_map @ w_hq, mask)  # (batch, T)
    v_hat = np.einsum("bl,bld->bd", a_v, regions)
    q_hat = np.einsum("bt,btd->bd", a_q, words)
    kernel, bias = (np.asarray(w) for w in joint.weights)
    h = np.tanh((v_hat + q_hat) @ kernel + bias)
    kernel, bias = (np.asarray(w) for w in answer.weights)
    return h @ kernel + bias, a_v, a_q


def test_the_head_equals_numpy_with_the_models_weights():
    model = small_model()
    features = keras.Model(
        model.inputs,
        [model.get_layer(REGION_FEATURES).output, model.get_layer(QUESTION_ENCODER).output],
    )
    inputs = {"images": IMAGES, "question_ids": QUESTIONS}
    regions, words = (np.asarray(x, "float64") for x in features(inputs))
    logits, a_v, a_q = numpy_head(
        model.get_layer(CO_ATTENTION),
        model.get_layer("joint"),
        model.get_layer("answer"),
        regions,
        words,
        QUESTIONS != 0,
    )
    outputs = model(inputs)
    # float32 against float64: the same sums in another precision
    np.testing.assert_allclose(outputs["logits"], logits, atol=1e-5, rtol=1e-4)
    np.testing.assert_allclose(outputs["attention"], a_v.reshape(3, 4, 4), atol=1e-6)
    np.testing.assert_allclose(outputs["question_attention"], a_q, atol=1e-6)
    assert np.all(np.asarray(outputs["question_attention"])[QUESTIONS == 0] == 0.0)
    # the weights are far from uniform, so the check above is not the trivial one
    assert np.abs(a_v - 1 / 16).max() > 0.05


def test_padding_and_its_values_do_not_change_the_answer():
    model = small_model()
    inputs = {"images": IMAGES, "question_ids": QUESTIONS}
    longer = np.pad(QUESTIONS, ((0, 0), (0, 3)))
    first, second = model(inputs), model({**inputs, "question_ids": longer})
    np.testing.assert_allclose(first["logits"], second["logits"], atol=1e-6)
    np.testing.assert_allclose(first["attention"], second["attention"], atol=1e-7)


def test_parallel_co_attention_passes_the_layer_harness():
    run_layer_test(
        ParallelCoAttention,
        {"units": 3},
        {"regions": V, "words": Q},
        mask=Q_MASK,
        padded_input="words",
        weights_kwarg=None,  # two weight maps of different shapes: checked above
        expected_output_shape=((2, 5), (2, 3)),
        # The check trains on the first output, v_hat, which w_hq does not reach (q_hat does);
        # tests/training/test_question_answering_task.py trains the whole model.
        run_training_check=False,
    )


def test_a_question_without_words_gives_finite_weights():
    layer = ParallelCoAttention(3)
    (v_hat, q_hat), (a_v, a_q) = layer(
        V, Q, words_mask=np.zeros((2, 4), bool), return_attention_scores=True
    )
    assert np.all(np.isfinite(v_hat)) and np.all(np.asarray(q_hat) == 0.0)
    np.testing.assert_allclose(np.asarray(a_v).sum(-1), 1.0, atol=1e-6)
    assert np.all(np.asarray(a_q) == 0.0)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="Received: units=0"):
        ParallelCoAttention(0)
    with pytest.raises(ValueError, match="Received: units=0"):
        vqa_coattention(12, 7, 16, units=0)
    with pytest.raises(ValueError, match="divisible by 2\\^len\\(encoder_filters\\) = 8"):
        vqa_coattention(12, 7, 20)


def test_the_model_saves_and_loads_with_the_same_outputs(tmp_path):
    model = small_model()
    path = tmp_path / "vqa.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    inputs = {"images": IMAGES, "question_ids": QUESTIONS}
    for key, value in model(inputs).items():
        np.testing.assert_allclose(loaded(inputs)[key], value, atol=1e-6)
