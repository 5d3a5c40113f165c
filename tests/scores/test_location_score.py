import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.scores.location_score import LocationScore
from keras_attn.testing import run_layer_test

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(15)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
K = RNG.normal(size=(2, 5, 6)).astype("float32")


def location_reference(q, w, key_length, act=lambda x: x):
    """act(W q), first key_length positions, float64."""
    return act(q.astype(np.float64) @ w)[:, :, :key_length]


def test_matches_numpy_eq_9():
    layer = LocationScore(max_length=8)
    out = ops.convert_to_numpy(layer(Q, K))
    assert tuple(layer.kernel.shape) == (4, 8)
    np.testing.assert_allclose(
        out, location_reference(Q, ops.convert_to_numpy(layer.kernel), 5), rtol=1e-5
    )
    # A shorter source reuses the same weights: its scores are a prefix.
    np.testing.assert_allclose(ops.convert_to_numpy(layer(Q, K[:, :2])), out[:, :, :2], rtol=1e-6)


def test_activation_and_key_values_ignored():
    layer = LocationScore(max_length=5, activation="tanh")
    out = ops.convert_to_numpy(layer(Q, K))
    expected = location_reference(Q, ops.convert_to_numpy(layer.kernel), 5, act=np.tanh)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(layer(Q, 1e3 * RNG.normal(size=K.shape))), out
    )


def test_max_length_from_build_shape():
    layer = LocationScore()
    layer(Q, K)
    assert layer.max_length is None and tuple(layer.kernel.shape) == (4, 5)


def test_dynamic_key_length_in_functional_model():
    query = keras.Input((None, 4))
    keys = keras.Input((None, 6))
    layer = LocationScore(max_length=7)
    model = keras.Model([query, keys], layer(query, keys))
    for length in (2, 7):
        out = ops.convert_to_numpy(model([Q, K[:, :1].repeat(length, axis=1)]))
        np.testing.assert_allclose(
            out, location_reference(Q, ops.convert_to_numpy(layer.kernel), length), rtol=1e-5
        )


def test_prepare_keys_then_score_equals_call():
    layer = LocationScore(max_length=6)
    full = ops.convert_to_numpy(layer(Q, K))
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer.score(Q, layer.prepare_keys(K))), full, rtol=1e-6
    )


def test_bad_arguments_and_too_long_keys():
    for max_length in (0, -1, 2.0, True, "8"):
        with pytest.raises(ValueError, match=f"max_length={max_length!r}"):
            LocationScore(max_length=max_length)
    with pytest.raises(ValueError, match="max_length=4.*length 5"):
        LocationScore(max_length=4)(Q, K)
    layer = LocationScore(max_length=5)
    layer(Q, K)
    with pytest.raises(ValueError, match="max_length=5.*length 6"):
        layer(Q, RNG.normal(size=(2, 6, 6)).astype("float32"))
    with pytest.raises(ValueError, match="static key length"):
        LocationScore().build((None, 3, 4), (None, None, 6))
    with pytest.raises(ValueError, match="nope"):
        LocationScore(activation="nope")


def test_harness():
    run_layer_test(
        LocationScore,
        {"max_length": 8, "activation": "tanh"},
        {"query": Q, "keys": K},
        weights_kwarg=None,
        expected_output_shape=(2, 3, 5),
        run_saved_model_check=True,
    )
