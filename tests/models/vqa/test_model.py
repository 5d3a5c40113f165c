"""The parallel co-attention answerer: its head against NumPy with the model's weights, masking,
arguments and saving (the layer itself: tests/layers/attention/test_parallel_co_attention.py)."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.models.vqa.model import (
    CO_ATTENTION,
    QUESTION_ENCODER,
    REGION_FEATURES,
    vqa_coattention,
)
from tests.layers.attention.test_parallel_co_attention import layer_weights
from tests.numpy_reference import parallel_co_attention

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(3, 16, 16, 3)).astype("uint8")
QUESTIONS = np.array([[4, 5, 6, 7], [8, 9, 0, 0], [10, 0, 0, 0]], "int32")
SMALL = {"embedding_dim": 5, "units": 6, "attention_units": 4, "encoder_filters": (4, 6)}


def small_model():
    model = vqa_coattention(12, 7, 16, dropout=0.0, **SMALL)
    # Random values in every weight, biases included, so no term of the equations hides at 0;
    # large w_hv and w_hq, so the weights are far from uniform.
    rng = np.random.default_rng(1)
    for weight in model.weights:
        scale = 0.2 if "conv_" in weight.path else 4.0 if "_score/" in weight.path else 0.7
        weight.assign(rng.normal(scale=scale, size=weight.shape).astype("float32"))
    return model


def numpy_head(layer, joint, answer, regions, words, mask):
    """The co-attention (tests.numpy_reference) and the answer layer (Lu et al.'s eq. 7-8) in
    NumPy, with the Keras layers' weights."""
    v_hat, q_hat, a_v, a_q = parallel_co_attention(regions, words, mask, *layer_weights(layer))
    kernel, bias = (np.asarray(w) for w in joint.weights)
    h = np.tanh((v_hat + q_hat) @ kernel + bias)
    kernel, bias = (np.asarray(w) for w in answer.weights)
    return h @ kernel + bias, a_v, a_q


def numpy_outputs(model, inputs) -> dict:
    """The model's outputs as NumPy arrays (tensors of any backend and device)."""
    return {name: ops.convert_to_numpy(value) for name, value in model(inputs).items()}


def test_the_head_equals_numpy_with_the_models_weights():
    model = small_model()
    features = keras.Model(
        model.inputs,
        [model.get_layer(REGION_FEATURES).output, model.get_layer(QUESTION_ENCODER).output],
    )
    inputs = {"images": IMAGES, "question_ids": QUESTIONS}
    regions, words = (ops.convert_to_numpy(x).astype("float64") for x in features(inputs))
    logits, a_v, a_q = numpy_head(
        model.get_layer(CO_ATTENTION),
        model.get_layer("joint"),
        model.get_layer("answer"),
        regions,
        words,
        QUESTIONS != 0,
    )
    outputs = numpy_outputs(model, inputs)
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
    first = numpy_outputs(model, inputs)
    second = numpy_outputs(model, {**inputs, "question_ids": longer})
    np.testing.assert_allclose(first["logits"], second["logits"], atol=1e-6)
    np.testing.assert_allclose(first["attention"], second["attention"], atol=1e-7)


def test_bad_arguments_are_refused():
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
    for key, value in numpy_outputs(model, inputs).items():
        np.testing.assert_allclose(numpy_outputs(loaded, inputs)[key], value, atol=1e-6)
