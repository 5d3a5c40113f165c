import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import ScalarMix
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.lazy_tf import tf

RNG = np.random.default_rng(11)
LAYERS = RNG.normal(size=(2, 5, 3, 4)).astype("float32")  # (batch, T, L + 1, d)
MASK = np.array([[True] * 5, [True, True, True, False, False]])
S = np.array([0.3, -1.2, 0.8], "float32")
GAMMA = 1.7


def numpy_scalar_mix(layers, s, gamma, layer_norm=False, epsilon=1e-12):
    """ELMo eq. 1: gamma * sum_j softmax(s)_j * h_j (each h_j layer-normalised if asked)."""
    layers = layers.astype(np.float64)
    if layer_norm:
        mean = layers.mean(-1, keepdims=True)
        variance = ((layers - mean) ** 2).mean(-1, keepdims=True)
        layers = (layers - mean) / np.sqrt(variance + epsilon)
    weights = ref.softmax(s.astype(np.float64))
    return gamma * np.einsum("j,btjd->btd", weights, layers)


def _mix(layer_norm):
    mix = ScalarMix(layer_norm=layer_norm)
    mix(LAYERS)
    mix.scalar_parameters.assign(S)
    mix.gamma.assign(GAMMA)
    return mix


@pytest.mark.parametrize("layer_norm", [False, True])
def test_matches_numpy_formula(layer_norm):
    mix = _mix(layer_norm)
    expected = numpy_scalar_mix(LAYERS, S, GAMMA, layer_norm)
    np.testing.assert_allclose(ops.convert_to_numpy(mix(LAYERS)), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        ops.convert_to_numpy(mix.mixing_weights()),
        np.exp(S) / np.exp(S).sum(),
        rtol=1e-6,
        atol=1e-7,
    )


def test_list_input_equals_stacked_input_and_masks():
    mix = _mix(False)
    as_list = [LAYERS[:, :, j] for j in range(3)]
    expected = numpy_scalar_mix(LAYERS, S, GAMMA) * MASK[:, :, None]
    np.testing.assert_allclose(
        ops.convert_to_numpy(mix(as_list, mask=[MASK] * 3)), expected, rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(mix(LAYERS, mask=MASK)), expected, rtol=1e-5, atol=1e-5
    )
    assert np.all(ops.convert_to_numpy(mix(LAYERS, mask=MASK))[1, 3:] == 0.0)


def test_keras_mask_reaches_the_next_layer():
    inputs = [keras.Input((5, 4)) for _ in range(3)]
    masked = [keras.layers.Masking(0.0)(x) for x in inputs]
    mixed = ScalarMix()(masked)
    pooled = keras.layers.GlobalAveragePooling1D()(mixed)
    model = keras.Model(inputs, pooled)
    data = [np.where(MASK[:, :, None], LAYERS[:, :, j], 0.0) for j in range(3)]
    mix = model.layers[-2]
    mixed_values = numpy_scalar_mix(LAYERS, np.zeros(3, "float32"), 1.0)
    expected = (mixed_values * MASK[:, :, None]).sum(1) / MASK.sum(1, keepdims=True)
    assert isinstance(mix, ScalarMix)
    np.testing.assert_allclose(ops.convert_to_numpy(model(data)), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.tensorflow_only
def test_weights_are_learned():
    mix = ScalarMix()
    mix(LAYERS)
    target = LAYERS[:, :, 2] * 3.0  # all weight on the top layer, scaled by 3
    optimizer = keras.optimizers.Adam(0.1)
    for _ in range(100):
        with tf.GradientTape() as tape:
            loss = keras.ops.mean(keras.ops.square(mix(LAYERS) - target))
        optimizer.apply(tape.gradient(loss, mix.trainable_variables), mix.trainable_variables)
    weights = ops.convert_to_numpy(mix.mixing_weights())
    assert weights.argmax() == 2 and weights[2] > 0.8
    assert float(ops.convert_to_numpy(mix.gamma)) > 2.0


def test_bad_arguments():
    with pytest.raises(ValueError, match="layer_norm='yes'"):
        ScalarMix(layer_norm="yes")
    with pytest.raises(ValueError, match="epsilon=0"):
        ScalarMix(epsilon=0)


@pytest.mark.every_backend
@pytest.mark.parametrize("layer_norm", [False, True])
def test_harness(layer_norm):
    run_layer_test(
        ScalarMix,
        {"layer_norm": layer_norm, "epsilon": 1e-12},
        {"inputs": LAYERS},
        mask=MASK,
        padded_input="inputs",
        mask_kwarg=None,
        weights_kwarg=None,
        expected_output_shape=(2, 5, 4),
        atol=1e-5,
        rtol=1e-5,
    )
