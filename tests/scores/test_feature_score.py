import numpy as np
import pytest
from keras import ops

from keras_attn.scores.additive_score import AdditiveScore
from keras_attn.scores.feature_score import FeatureScore
from keras_attn.testing import run_layer_test

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(16)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
K = RNG.normal(size=(2, 5, 6)).astype("float32")


def feature_reference(q, k, w0, w1, v, b, phi=lambda x: np.maximum(x, 0.0), act=np.tanh):
    """v^T act(W_0 phi(k_i) + W_1 phi(q) + b), float64."""
    hidden = (phi(q.astype(np.float64)) @ w1)[:, :, None, :] + (phi(k) @ w0)[:, None, :, :] + b
    return act(hidden) @ v


def built_layer(**kwargs):
    layer = FeatureScore(**kwargs)
    layer(Q, K)
    if layer.bias is not None:
        layer.bias.assign(RNG.normal(size=layer.bias.shape).astype("float32"))
    return layer


def reference_for(layer, **kwargs):
    w = {x.name: ops.convert_to_numpy(x) for x in layer.weights}
    bias = w.get("bias", 0.0)
    return feature_reference(Q, K, w["key_kernel"], w["query_kernel"], w["v"], bias, **kwargs)


def test_matches_numpy_relu_features():
    layer = built_layer(units=7)
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(Q, K)), reference_for(layer), rtol=1e-5, atol=1e-6
    )


def test_other_feature_map_without_bias():
    layer = built_layer(units=3, feature_map="elu", activation="sigmoid", use_bias=False)
    expected = reference_for(
        layer,
        phi=lambda x: np.where(x > 0, x, np.expm1(x)),
        act=lambda x: 1.0 / (1.0 + np.exp(-x)),
    )
    np.testing.assert_allclose(ops.convert_to_numpy(layer(Q, K)), expected, rtol=1e-5, atol=1e-6)


def test_features_are_used_and_linear_map_is_additive():
    layer = built_layer(units=5, feature_map="linear")
    additive = AdditiveScore(5)
    additive(Q, K)
    for name in ("query_kernel", "key_kernel", "bias", "v"):
        getattr(additive, name).assign(ops.convert_to_numpy(getattr(layer, name)))
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(Q, K)), ops.convert_to_numpy(additive(Q, K)), rtol=1e-6
    )
    relu = built_layer(units=5)
    for name in ("query_kernel", "key_kernel", "bias", "v"):
        getattr(relu, name).assign(ops.convert_to_numpy(getattr(layer, name)))
    assert not np.allclose(
        ops.convert_to_numpy(relu(Q, K)), ops.convert_to_numpy(additive(Q, K)), atol=1e-3
    )


def test_prepare_keys_then_score_equals_call():
    layer = built_layer(units=4)
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer.score(Q, layer.prepare_keys(K))),
        ops.convert_to_numpy(layer(Q, K)),
        rtol=1e-6,
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="units=0"):
        FeatureScore(units=0)
    with pytest.raises(ValueError, match="nope"):
        FeatureScore(feature_map="nope")


def test_harness():
    run_layer_test(
        FeatureScore,
        {"units": 6, "feature_map": "elu"},
        {"query": Q, "keys": K},
        weights_kwarg=None,
        expected_output_shape=(2, 3, 5),
        run_saved_model_check=True,
    )
