import numpy as np
import pytest
from keras import ops

from keras_attn.scores.activated_general_score import ActivatedGeneralScore
from keras_attn.scores.general_score import GeneralScore
from keras_attn.testing import run_layer_test

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(13)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
K = RNG.normal(size=(2, 5, 6)).astype("float32")


def activated_general_reference(q, k, w, b, act=np.tanh):
    """act(q^T W k_i + b), float64."""
    return act(np.einsum("bqi,ij,bkj->bqk", q.astype(np.float64), w, k) + b)


def built_layer(**kwargs):
    layer = ActivatedGeneralScore(**kwargs)
    layer(Q, K)
    if layer.bias is not None:
        layer.bias.assign(0.3)
    return layer


def test_matches_numpy_tanh():
    layer = built_layer()
    expected = activated_general_reference(Q, K, ops.convert_to_numpy(layer.kernel), 0.3)
    np.testing.assert_allclose(ops.convert_to_numpy(layer(Q, K)), expected, rtol=1e-5, atol=1e-6)


def test_linear_without_bias_equals_general():
    layer = built_layer(activation="linear", use_bias=False)
    assert layer.bias is None and len(layer.weights) == 1
    general = GeneralScore()
    general(Q, K)
    general.kernel.assign(ops.convert_to_numpy(layer.kernel))
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(Q, K)), ops.convert_to_numpy(general(Q, K)), rtol=1e-6
    )


def test_prepare_keys_then_score_equals_call():
    layer = built_layer(activation="sigmoid")
    expected = activated_general_reference(
        Q, K, ops.convert_to_numpy(layer.kernel), 0.3, act=lambda x: 1 / (1 + np.exp(-x))
    )
    out = ops.convert_to_numpy(layer.score(Q, layer.prepare_keys(K)))
    np.testing.assert_allclose(out, ops.convert_to_numpy(layer(Q, K)), rtol=1e-6)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="nope"):
        ActivatedGeneralScore(activation="nope")
    with pytest.raises(ValueError, match="nope"):
        ActivatedGeneralScore(kernel_initializer="nope")


def test_harness():
    run_layer_test(
        ActivatedGeneralScore,
        {"activation": "tanh", "use_bias": True},
        {"query": Q, "keys": K},
        weights_kwarg=None,
        expected_output_shape=(2, 3, 5),
        run_saved_model_check=True,
    )
