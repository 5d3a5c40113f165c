import keras
import numpy as np
import pytest

from keras_attn.scores.dot_score import DotScore
from keras_attn.scores.scaled_dot_score import ScaledDotScore
from keras_attn.testing import run_layer_test

RNG = np.random.default_rng(11)
Q = RNG.normal(size=(2, 3, 9)).astype("float32")
K = RNG.normal(size=(2, 5, 9)).astype("float32")


def test_matches_numpy_eq_1():
    expected = np.einsum("bqd,bkd->bqk", Q.astype(np.float64), K) / 3.0  # sqrt(d_k = 9)
    np.testing.assert_allclose(ScaledDotScore()(Q, K).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_equals_keras_attention_with_scale_set():
    ours = ScaledDotScore()(Q, K).numpy()
    keras_attention = keras.layers.Attention(use_scale=True)
    keras_attention([Q, K])
    keras_attention.scale.assign(1.0 / 3.0)
    theirs = keras_attention._calculate_scores(query=Q, key=K).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours * 3.0, DotScore()(Q, K).numpy(), rtol=1e-5, atol=1e-5)


def test_prepare_keys_then_score_equals_call():
    layer = ScaledDotScore()
    full = layer(Q, K).numpy()
    prepared = layer.prepare_keys(K).numpy()
    np.testing.assert_allclose(prepared, K / 3.0, rtol=1e-6)
    np.testing.assert_allclose(layer.score(Q, prepared).numpy(), full, rtol=1e-6)


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
