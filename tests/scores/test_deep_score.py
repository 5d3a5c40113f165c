import numpy as np
import pytest
from keras import ops

from keras_attn.scores.additive_score import AdditiveScore
from keras_attn.scores.deep_score import DeepScore
from keras_attn.testing import run_layer_test

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(14)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
K = RNG.normal(size=(2, 5, 6)).astype("float32")


def relu(x):
    return np.maximum(x, 0.0)


def deep_reference(q, k, w0, w1, b1, hidden, v, b_out, act=relu):
    """E1 = act(W0 k_i + W1 q + b1); E_l = act(W_l E_{l-1} + b_l); a = v^T E_{L-1} + b_L."""
    e = act((q.astype(np.float64) @ w1)[:, :, None, :] + (k @ w0)[:, None, :, :] + b1)
    for w, b in hidden:
        e = act(e @ w + b)
    return e @ v + b_out


def randomise(layer):
    """Non-zero biases, so the reference checks where every bias enters."""
    for weight in layer.weights:
        if "bias" in weight.name:
            weight.assign(RNG.normal(size=weight.shape).astype("float32"))


def reference_for(layer, act=relu):
    w = {x.name: ops.convert_to_numpy(x) for x in layer.weights}
    hidden = [(w[f"kernel_{i}"], w[f"bias_{i}"]) for i in range(2, len(layer.hidden_kernels) + 2)]
    return deep_reference(
        Q, K, w["key_kernel"], w["query_kernel"], w["bias_1"], hidden, w["v"], w["output_bias"], act
    )


def test_matches_numpy_three_hidden_layers():
    layer = DeepScore(units=[7, 5, 3])
    layer(Q, K)
    randomise(layer)
    assert [tuple(k.shape) for k in layer.hidden_kernels] == [(7, 5), (5, 3)]
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(Q, K)), reference_for(layer), rtol=1e-5, atol=1e-5
    )


def test_int_units_and_num_layers():
    layer = DeepScore(units=4, num_layers=3, activation="tanh")
    layer(Q, K)
    randomise(layer)
    assert [tuple(k.shape) for k in layer.hidden_kernels] == [(4, 4), (4, 4)]
    expected = reference_for(layer, act=np.tanh)
    np.testing.assert_allclose(ops.convert_to_numpy(layer(Q, K)), expected, rtol=1e-5, atol=1e-5)
    default = DeepScore()
    default(Q, K)
    assert [tuple(k.shape) for k in default.hidden_kernels] == [(6, 6)]  # key size, 2 layers


def test_one_hidden_layer_is_additive_plus_output_bias():
    layer = DeepScore(units=[5], activation="tanh")
    layer(Q, K)
    randomise(layer)
    additive = AdditiveScore(5)
    additive(Q, K)
    additive.query_kernel.assign(ops.convert_to_numpy(layer.query_kernel))
    additive.key_kernel.assign(ops.convert_to_numpy(layer.key_kernel))
    additive.bias.assign(ops.convert_to_numpy(layer.hidden_biases[0]))
    additive.v.assign(ops.convert_to_numpy(layer.v))
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(Q, K)),
        ops.convert_to_numpy(additive(Q, K)) + ops.convert_to_numpy(layer.output_bias),
        rtol=1e-5,
        atol=1e-6,
    )


def test_prepare_keys_then_score_equals_call():
    layer = DeepScore(units=[6, 3])
    layer(Q, K)
    randomise(layer)
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer.score(Q, layer.prepare_keys(K))),
        ops.convert_to_numpy(layer(Q, K)),
        rtol=1e-6,
    )


def test_bad_arguments():
    for units in (0, -2, [], [4, 0], 2.5, True):
        with pytest.raises(ValueError, match="units="):
            DeepScore(units=units)
    for num_layers in (0, 1.5, "2"):
        with pytest.raises(ValueError, match=f"num_layers={num_layers!r}"):
            DeepScore(num_layers=num_layers)
    with pytest.raises(ValueError, match="num_layers=3, units=\\[4, 4\\]"):
        DeepScore(units=[4, 4], num_layers=3)


@pytest.mark.parametrize(
    "kwargs", [{"units": [5, 3], "activation": "relu"}, {"units": 4, "num_layers": 3}]
)
def test_harness(kwargs):
    run_layer_test(
        DeepScore,
        kwargs,
        {"query": Q, "keys": K},
        weights_kwarg=None,
        expected_output_shape=(2, 3, 5),
        run_saved_model_check="num_layers" in kwargs,
    )
