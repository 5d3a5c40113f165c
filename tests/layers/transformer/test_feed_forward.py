import keras
import numpy as np
import pytest

from keras_attn.layers import FeedForward
from keras_attn.testing import run_layer_test
from tests.layers.transformer import numpy_transformer as npt

RNG = np.random.default_rng(3)
B, T, D = 2, 5, 6
X = RNG.normal(size=(B, T, D)).astype("float32")


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_matches_numpy_reference(activation):
    layer = FeedForward(hidden_dim=10, activation=activation)
    layer(X)
    npt.randomise(layer, scale=0.5)
    expected = npt.feed_forward(layer, X.astype("float64"))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(X)), expected, rtol=1e-5, atol=1e-5)


def test_equals_two_keras_dense_layers_with_copied_weights():
    layer = FeedForward(hidden_dim=10, output_dim=4)
    layer(X)
    npt.randomise(layer, seed=1, scale=0.5)
    keras_ffn = keras.Sequential(
        [keras.Input((T, D)), keras.layers.Dense(10, activation="relu"), keras.layers.Dense(4)]
    )
    keras_ffn.set_weights(layer.get_weights())
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(layer(X)),
        keras.ops.convert_to_numpy(keras_ffn(X)),
        rtol=1e-6,
        atol=1e-6,
    )


def test_position_wise():
    layer = FeedForward(hidden_dim=10)
    full = keras.ops.convert_to_numpy(layer(X))
    one = keras.ops.convert_to_numpy(layer(X[:, 2:3]))
    np.testing.assert_allclose(one[:, 0], full[:, 2], rtol=1e-6, atol=1e-6)


def test_dropout_only_in_training():
    layer = FeedForward(hidden_dim=64, dropout=0.5)
    inference = keras.ops.convert_to_numpy(layer(X))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(X, training=False)), inference)
    assert not np.allclose(keras.ops.convert_to_numpy(layer(X, training=True)), inference)


def test_bad_arguments():
    with pytest.raises(ValueError, match="hidden_dim=0"):
        FeedForward(hidden_dim=0)
    with pytest.raises(ValueError, match="output_dim=-2"):
        FeedForward(hidden_dim=4, output_dim=-2)
    with pytest.raises(ValueError, match="activation='swishy'"):
        FeedForward(hidden_dim=4, activation="swishy")
    with pytest.raises(ValueError, match="dropout=1.0"):
        FeedForward(hidden_dim=4, dropout=1.0)


@pytest.mark.every_backend
def test_harness():
    run_layer_test(
        FeedForward,
        {"hidden_dim": 12, "output_dim": 4, "activation": "gelu", "dropout": 0.1},
        {"inputs": X},
        mask=np.array([[True] * T, [True, True, False, False, False]]),
        padded_input="inputs",
        weights_kwarg=None,
        expected_output_shape=(B, T, 4),
    )
