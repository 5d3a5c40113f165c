"""One initializer instance must not give several weights the same starting values."""

import keras
import numpy as np
import pytest

from keras_attn import layers, scores
from keras_attn._initializers import clone_initializer


def test_clone_gives_fresh_draws_for_unseeded_and_keeps_an_explicit_seed():
    unseeded = keras.initializers.GlorotUniform()
    assert not np.array_equal(unseeded((4, 4)), clone_initializer(unseeded)((4, 4)))
    # The shared-instance behaviour the clone exists to avoid:
    np.testing.assert_array_equal(unseeded((4, 4)), unseeded((4, 4)))
    seeded = keras.initializers.GlorotUniform(seed=3)
    np.testing.assert_array_equal(seeded((4, 4)), clone_initializer(seeded)((4, 4)))
    assert clone_initializer("zeros") == "zeros"


def _random_weights_by_shape(layer):
    """Weights that are not constant (biases, LayerNorm scales), grouped by shape."""
    groups = {}
    for weight in layer.weights:
        value = keras.ops.convert_to_numpy(weight)
        if value.size > 1 and np.ptp(value) > 0:
            groups.setdefault(value.shape, []).append((weight.path, value))
    return groups


def _mha():
    layer = layers.MultiHeadAttention(num_heads=2, key_dim=8, value_dim=8, output_shape=16)
    x = np.zeros((1, 3, 16), "float32")
    layer(x, x)
    return layer


def _kernel():
    layer = layers.KernelAttention(num_heads=2, key_dim=8, num_features=8)
    x = np.zeros((1, 3, 16), "float32")
    layer(x, x)
    return layer


def _score(name):
    def build():
        score = scores.get(name, units=8) if name != "deep" else scores.get(name)
        score(np.zeros((1, 2, 8), "float32"), np.zeros((1, 3, 8), "float32"))
        return score

    return build


def _encoder_block():
    layer = layers.TransformerEncoderBlock(num_heads=2, intermediate_dim=16)
    layer(np.zeros((1, 3, 16), "float32"))
    return layer


def _decoder_block():
    layer = layers.TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    layer(np.zeros((1, 3, 16), "float32"), np.zeros((1, 4, 16), "float32"))
    return layer


@pytest.mark.parametrize(
    "build",
    [_mha, _kernel, _score("additive"), _score("deep"), _encoder_block, _decoder_block],
    ids=["mha", "kernel", "additive", "deep", "encoder_block", "decoder_block"],
)
def test_same_shape_weights_start_different(build):
    keras.utils.set_random_seed(0)
    groups = _random_weights_by_shape(build())
    assert any(len(group) > 1 for group in groups.values()), "nothing to compare"
    for group in groups.values():
        for index, (path_a, value_a) in enumerate(group):
            for path_b, value_b in group[index + 1 :]:
                assert not np.array_equal(value_a, value_b), f"{path_a} == {path_b}"
