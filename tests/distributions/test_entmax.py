import math

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.distributions.entmax import Entmax
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.lazy_tf import tf
from tests.ops import numpy_distributions as sparse_ref

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(4)
SCORES = RNG.normal(scale=1.5, size=(2, 3, 5)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])
ATTENTION_MASK = np.broadcast_to(MASK[:, None, :], SCORES.shape)


@pytest.mark.parametrize("alpha", [1.3, 1.5, 2.0])
def test_matches_numpy_reference_with_mask(alpha):
    out = ops.convert_to_numpy(Entmax(alpha=alpha)(SCORES, attention_mask=ATTENTION_MASK))
    np.testing.assert_allclose(out, sparse_ref.entmax(SCORES, alpha, ATTENTION_MASK), atol=2e-6)
    assert np.all(out[~ATTENTION_MASK] == 0.0)


def test_alpha_close_to_one_is_softmax():
    out = ops.convert_to_numpy(Entmax(alpha=1.001)(SCORES, attention_mask=ATTENTION_MASK))
    np.testing.assert_allclose(out, ref.softmax(SCORES, ATTENTION_MASK), atol=2e-3)


@pytest.mark.tensorflow_only
def test_learnable_alpha_starts_at_alpha_and_gets_the_implicit_gradient():
    layer = Entmax(alpha=1.4, learnable=True)
    out = layer(SCORES, attention_mask=ATTENTION_MASK)
    assert [w.name for w in layer.trainable_weights] == ["raw_alpha"]
    np.testing.assert_allclose(float(layer.current_alpha()), 1.4, rtol=1e-6)
    np.testing.assert_allclose(
        ops.convert_to_numpy(out), sparse_ref.entmax(SCORES, 1.4, ATTENTION_MASK), atol=2e-6
    )
    cotangent = RNG.normal(size=SCORES.shape)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(SCORES, attention_mask=ATTENTION_MASK) * cotangent)
    grad = float(tape.gradient(loss, layer.raw_alpha.value))
    eps = 1e-6

    def loss_at(alpha):
        return (sparse_ref.entmax(SCORES, alpha, ATTENTION_MASK) * cotangent).sum()

    dloss_dalpha = (loss_at(1.4 + eps) - loss_at(1.4 - eps)) / (2 * eps)
    dalpha_draw = 1 / (1 + math.exp(-math.log(math.expm1(0.39))))  # softplus' = sigmoid(raw)
    assert abs(dloss_dalpha) > 1e-2
    np.testing.assert_allclose(grad, dloss_dalpha * dalpha_draw, rtol=1e-3)


def test_learned_alpha_stays_above_one():
    layer = Entmax(alpha=1.5, learnable=True)
    layer(SCORES)
    layer.raw_alpha.assign(-30.0)
    alpha = float(layer.current_alpha())
    np.testing.assert_allclose(alpha, 1.01, rtol=1e-6)
    assert np.all(np.isfinite(ops.convert_to_numpy(layer(SCORES, attention_mask=ATTENTION_MASK))))


def test_fully_masked_row_gives_zeros_not_nan():
    mask = ATTENTION_MASK.copy()
    mask[1, 0] = False
    for dtype in ("float32", "mixed_float16"):
        layer = Entmax(alpha=1.5, learnable=True, dtype=dtype)
        out = ops.convert_to_numpy(layer(SCORES * 1e3, attention_mask=mask)).astype("float32")
        assert np.all(np.isfinite(out))
        np.testing.assert_array_equal(out[1, 0], 0.0)


@pytest.mark.parametrize("learnable", [False, True])
def test_harness(learnable):
    run_layer_test(
        Entmax,
        {"alpha": 1.5, "learnable": learnable, "n_iter": 30},
        {"scores": SCORES[:, 0]},
        mask=MASK,
        padded_input="scores",
        mask_kwarg="attention_mask",
        weights_kwarg=None,
        expected_output_shape=(2, 5),
        run_saved_model_check=learnable,
    )


def test_config_round_trip_keeps_learned_alpha_setting():
    layer = Entmax(alpha=1.7, learnable=True, n_iter=20)
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert (clone.alpha, clone.learnable, clone.n_iter) == (1.7, True, 20)


def test_bad_arguments():
    with pytest.raises(ValueError, match="alpha=1.0"):
        Entmax(alpha=1.0)
    with pytest.raises(ValueError, match="alpha='big'"):
        Entmax(alpha="big")
    with pytest.raises(ValueError, match="learnable='yes'"):
        Entmax(learnable="yes")
    with pytest.raises(ValueError, match="alpha=1.005"):
        Entmax(alpha=1.005, learnable=True)
    with pytest.raises(ValueError, match="n_iter=0"):
        Entmax(n_iter=0)
