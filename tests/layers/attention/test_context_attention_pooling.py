import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers.attention.context_attention_pooling import ContextAttentionPooling
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(3)
H = RNG.normal(size=(2, 5, 4)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])


def numpy_pooling(h, mask, kernel, bias, context):
    """Yang et al. (2016) eqs. 5-7: u_t = tanh(W h_t + b), alpha = softmax(u_t^T u)."""
    scores = np.tanh(h.astype(np.float64) @ kernel + bias) @ context
    weights = ref.softmax(scores, mask)
    return np.einsum("bt,btd->bd", weights, h), weights


def test_matches_numpy_reference():
    layer = ContextAttentionPooling(6, context_initializer="random_normal")
    layer.build(H.shape)
    layer.bias.assign(RNG.normal(size=(6,)).astype("float32"))
    w = {x.name: ops.convert_to_numpy(x) for x in layer.weights}
    pooled, weights = layer(H, mask=MASK, return_attention_scores=True)
    expected, expected_weights = numpy_pooling(H, MASK, w["kernel"], w["bias"], w["context"])
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(ops.convert_to_numpy(pooled), expected, rtol=1e-5, atol=1e-6)
    assert np.all(ops.convert_to_numpy(weights)[1, 3:] == 0.0)
    np.testing.assert_allclose(ops.convert_to_numpy(weights).sum(-1), 1.0, rtol=1e-6)


def test_keras_masking_and_fully_masked_row():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    pooled, weights = ContextAttentionPooling(3)(embedded, return_attention_scores=True)
    model = keras.Model(tokens, [pooled, weights])
    pooled, weights = model(np.array([[1, 2, 0, 0], [0, 0, 0, 0]]))
    np.testing.assert_array_equal(ops.convert_to_numpy(weights)[0, 2:], 0.0)
    np.testing.assert_allclose(ops.convert_to_numpy(weights)[0].sum(), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(ops.convert_to_numpy(weights)[1], 0.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(pooled)[1], 0.0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="units=0"):
        ContextAttentionPooling(0)
    with pytest.raises(ValueError, match="units='8'"):
        ContextAttentionPooling("8")


@pytest.mark.every_backend
def test_harness():
    run_layer_test(
        ContextAttentionPooling,
        {"units": 6},
        {"inputs": H},
        mask=MASK,
        padded_input="inputs",
        expected_output_shape=(2, 4),
        run_saved_model_check=True,
    )
