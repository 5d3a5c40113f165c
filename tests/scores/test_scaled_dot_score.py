import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.scores.dot_score import DotScore
from keras_attn.scores.scaled_dot_score import ScaledDotScore
from keras_attn.testing import run_layer_test

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(11)
Q = RNG.normal(size=(2, 3, 9)).astype("float32")
K = RNG.normal(size=(2, 5, 9)).astype("float32")


def test_matches_numpy_eq_1():
    expected = np.einsum("bqd,bkd->bqk", Q.astype(np.float64), K) / 3.0  # sqrt(d_k = 9)
    np.testing.assert_allclose(
        ops.convert_to_numpy(ScaledDotScore()(Q, K)), expected, rtol=1e-5, atol=1e-6
    )


def test_equals_keras_attention_with_scale_set():
    ours = ops.convert_to_numpy(ScaledDotScore()(Q, K))
    keras_attention = keras.layers.Attention(use_scale=True)
    keras_attention([Q, K])
    keras_attention.scale.assign(1.0 / 3.0)
    theirs = ops.convert_to_numpy(keras_attention._calculate_scores(query=Q, key=K))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        ours * 3.0, ops.convert_to_numpy(DotScore()(Q, K)), rtol=1e-5, atol=1e-5
    )


def test_prepare_keys_then_score_equals_call():
    layer = ScaledDotScore()
    full = ops.convert_to_numpy(layer(Q, K))
    prepared = ops.convert_to_numpy(layer.prepare_keys(K))
    np.testing.assert_allclose(prepared, K / 3.0, rtol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(layer.score(Q, prepared)), full, rtol=1e-6)


def test_bad_shapes():
    with pytest.raises(ValueError, match="same size"):
        ScaledDotScore()(Q, K[..., :4])
    with pytest.raises(ValueError, match="known key size"):
        ScaledDotScore().build((None, None, 4), (None, None, None))


def test_harness():
    run_layer_test(
        ScaledDotScore,
        {},
        {"query": Q, "keys": K},
        weights_kwarg=None,
        expected_output_shape=(2, 3, 5),
        run_saved_model_check=True,
    )
