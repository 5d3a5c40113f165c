import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.scores.cosine_score import CosineScore
from keras_attn.testing import run_layer_test
from tests.lazy_tf import tf

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(10)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
K = RNG.normal(size=(2, 5, 4)).astype("float32")


def cosine_reference(q, k, eps=1e-6):
    """cos(q, k_i) = q^T k_i / (max(|q|, eps) max(|k_i|, eps)), float64."""
    q, k = q.astype(np.float64), k.astype(np.float64)
    qn = np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), eps)
    kn = np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), eps)
    return np.einsum("bqd,bkd->bqk", q / qn, k / kn)


def test_matches_numpy_and_keras_dot_normalize():
    out = ops.convert_to_numpy(CosineScore()(Q, K))
    np.testing.assert_allclose(out, cosine_reference(Q, K), rtol=1e-5, atol=1e-6)
    theirs = ops.convert_to_numpy(keras.layers.Dot(axes=2, normalize=True)([Q, K]))
    np.testing.assert_allclose(out, theirs, rtol=1e-5, atol=1e-6)
    assert np.all(np.abs(out) <= 1.0 + 1e-6)


def test_scale_invariant_and_zero_vectors_score_zero():
    layer = CosineScore()
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(10.0 * Q, 0.1 * K)), ops.convert_to_numpy(layer(Q, K)), atol=1e-6
    )
    keys = K.copy()
    keys[0, 2] = 0.0
    out = ops.convert_to_numpy(layer(Q, keys))
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[0, :, 2], 0.0)


@pytest.mark.tensorflow_only
def test_zero_vector_gradient_is_finite():
    query = tf.Variable(np.zeros((1, 1, 4), "float32"))
    with tf.GradientTape() as tape:
        total = keras.ops.sum(CosineScore()(query, K[:1]))
    assert np.all(np.isfinite(ops.convert_to_numpy(tape.gradient(total, query))))


def test_prepare_keys_then_score_equals_call():
    layer = CosineScore()
    full = ops.convert_to_numpy(layer(Q, K))
    prepared = layer.prepare_keys(K)
    np.testing.assert_allclose(
        np.linalg.norm(ops.convert_to_numpy(prepared), axis=-1), 1.0, rtol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer.score(Q, prepared)), full, rtol=1e-6, atol=1e-7
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="epsilon=0"):
        CosineScore(epsilon=0)
    with pytest.raises(ValueError, match="epsilon='a'"):
        CosineScore(epsilon="a")
    with pytest.raises(ValueError, match="same size"):
        CosineScore()(Q, RNG.normal(size=(2, 5, 6)).astype("float32"))


def test_harness():
    run_layer_test(
        CosineScore,
        {"epsilon": 1e-5},
        {"query": Q, "keys": K},
        weights_kwarg=None,
        expected_output_shape=(2, 3, 5),
        run_saved_model_check=True,
    )
