import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.scores.dot_score import DotScore
from keras_attn.scores.general_score import GeneralScore
from keras_attn.scores.residual_general_score import ResidualGeneralScore
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.lazy_tf import tf

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(12)
D = 9
Q = RNG.normal(size=(2, 3, D)).astype("float32")
K = RNG.normal(size=(2, 5, D)).astype("float32")
W = RNG.normal(size=(D, D)).astype("float32")


def test_starts_as_the_dot_score():
    np.testing.assert_allclose(
        ops.convert_to_numpy(ResidualGeneralScore()(Q, K)),
        ops.convert_to_numpy(DotScore()(Q, K)),
        rtol=1e-6,
        atol=1e-6,
    )


def test_matches_numpy_general_with_w_a_identity_plus_w_over_d():
    layer = ResidualGeneralScore()
    layer(Q, K)
    layer.kernel.assign(W)
    w_a = np.eye(D, dtype="float32") + W / D
    expected = ref.general_score(Q.astype(np.float64), K, w_a)
    np.testing.assert_allclose(ops.convert_to_numpy(layer(Q, K)), expected, rtol=1e-5, atol=1e-5)
    general = GeneralScore()
    general(Q, K)
    general.kernel.assign(w_a)
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(Q, K)), ops.convert_to_numpy(general(Q, K)), rtol=1e-5, atol=1e-5
    )


def test_prepare_keys_then_score_equals_call():
    layer = ResidualGeneralScore(kernel_initializer=keras.initializers.Constant(0.3))
    full = ops.convert_to_numpy(layer(Q, K))
    prepared = ops.convert_to_numpy(layer.prepare_keys(K))
    np.testing.assert_allclose(prepared, K + K @ np.full((D, D), 0.3).T / D, rtol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(layer.score(Q, prepared)), full, rtol=1e-6)


def test_bad_shapes():
    with pytest.raises(ValueError, match="same, known size"):
        ResidualGeneralScore()(Q, K[..., :4])
    with pytest.raises(ValueError, match="same, known size"):
        ResidualGeneralScore().build((None, None, None), (None, None, 4))


def adam_step_change(layer, upstream, learning_rate=1e-2):
    """How much one Adam step on `loss = sum(score * upstream)` changes the layer's scores."""
    before = ops.convert_to_numpy(layer(Q, K))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(Q, K) * upstream)
    gradients = tape.gradient(loss, layer.trainable_variables)
    keras.optimizers.Adam(learning_rate).apply(gradients, layer.trainable_variables)
    return ops.convert_to_numpy(layer(Q, K)) - before


@pytest.mark.tensorflow_only
def test_one_adam_step_moves_the_score_one_dth_as_far_as_the_general_score():
    # The reason for the class: from the same function (W_a = I), Adam's first step moves each
    # kernel entry by about the learning rate in both, and the residual form divides the effect
    # of that move on the score by d.
    upstream = RNG.normal(size=(2, 3, 5)).astype("float32")
    general = GeneralScore(kernel_initializer="identity")
    residual = ResidualGeneralScore()
    np.testing.assert_allclose(
        ops.convert_to_numpy(general(Q, K)), ops.convert_to_numpy(residual(Q, K)), rtol=1e-6
    )
    general_change = adam_step_change(general, upstream)
    residual_change = adam_step_change(residual, upstream)
    assert np.abs(general_change).max() > 0.1  # the step changed the general score
    np.testing.assert_allclose(residual_change * D, general_change, rtol=1e-3, atol=1e-4)


def test_harness():
    run_layer_test(
        ResidualGeneralScore,
        {"kernel_initializer": "glorot_uniform"},
        {"query": Q, "keys": K},
        weights_kwarg=None,
        expected_output_shape=(2, 3, 5),
        run_saved_model_check=True,
    )
