import numpy as np
import pytest
from keras import ops

from keras_attn.scores.biased_general_score import BiasedGeneralScore
from keras_attn.testing import run_layer_test

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(12)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
K = RNG.normal(size=(2, 5, 6)).astype("float32")


def biased_general_reference(q, k, w, b):
    """k_i^T (W q + b), float64."""
    projected = np.einsum("ji,bqi->bqj", w.astype(np.float64), q) + b  # (batch, T_q, d_k)
    return np.einsum("bkj,bqj->bqk", k, projected)


def built_layer(**kwargs):
    layer = BiasedGeneralScore(**kwargs)
    layer(Q, K)
    layer.bias.assign(RNG.normal(size=(6,)).astype("float32"))
    return layer


def test_matches_numpy():
    layer = built_layer()
    assert tuple(layer.kernel.shape) == (6, 4)
    expected = biased_general_reference(
        Q, K, ops.convert_to_numpy(layer.kernel), ops.convert_to_numpy(layer.bias)
    )
    np.testing.assert_allclose(ops.convert_to_numpy(layer(Q, K)), expected, rtol=1e-5, atol=1e-5)


def test_bias_contributes_k_dot_b():
    layer = built_layer()
    with_bias = ops.convert_to_numpy(layer(Q, K))
    bias = ops.convert_to_numpy(layer.bias)
    layer.bias.assign(np.zeros(6, "float32"))
    np.testing.assert_allclose(
        with_bias - ops.convert_to_numpy(layer(Q, K)),
        np.broadcast_to((K @ bias)[:, None, :], with_bias.shape),
        rtol=1e-5,
        atol=1e-5,
    )


def test_prepare_keys_then_score_equals_call():
    layer = built_layer()
    prepared = layer.prepare_keys(K)
    assert tuple(prepared.shape) == (2, 5, 5)  # [K W ; K b]: d_q + 1
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer.score(Q, prepared)),
        ops.convert_to_numpy(layer(Q, K)),
        rtol=1e-6,
        atol=1e-6,
    )


def test_harness():
    run_layer_test(
        BiasedGeneralScore,
        {"kernel_initializer": "glorot_normal", "bias_initializer": "ones"},
        {"query": Q, "keys": K},
        weights_kwarg=None,
        expected_output_shape=(2, 3, 5),
        run_saved_model_check=True,
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="nope"):
        BiasedGeneralScore(kernel_initializer="nope")
    with pytest.raises(ValueError, match="nope"):
        BiasedGeneralScore(bias_initializer="nope")
