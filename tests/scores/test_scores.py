import keras
import numpy as np
import pytest
from keras import ops

from keras_attn import scores
from keras_attn.layers import Attention
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(0)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
K = RNG.normal(size=(2, 5, 4)).astype("float32")
K6 = RNG.normal(size=(2, 5, 6)).astype("float32")


def weights(layer):
    return {w.name: ops.convert_to_numpy(w) for w in layer.weights}


def test_dot_matches_numpy():
    np.testing.assert_allclose(
        ops.convert_to_numpy(scores.get("dot")(Q, K)), ref.dot_score(Q, K), rtol=1e-5
    )


def test_dot_rejects_mismatched_sizes():
    with pytest.raises(ValueError, match="same size"):
        scores.get("dot")(Q, K6)


def test_scaled_general_is_general_over_sqrt_d_q():
    general, scaled = scores.get("general"), scores.get("scaled_general")
    general(Q, K6)
    scaled(Q, K6)
    scaled.kernel.assign(general.kernel)
    reference = ref.general_score(Q, K6, weights(general)["kernel"]) / np.sqrt(Q.shape[-1])
    np.testing.assert_allclose(ops.convert_to_numpy(scaled(Q, K6)), reference, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="known query size"):
        scores.ScaledGeneralScore().build((None, None, None), (None, None, 4))


def test_general_matches_numpy():
    layer = scores.get("general")
    out = ops.convert_to_numpy(layer(Q, K6))
    np.testing.assert_allclose(out, ref.general_score(Q, K6, weights(layer)["kernel"]), rtol=1e-5)


def test_additive_matches_numpy_eq_2_21():
    layer = scores.get("additive", units=7)
    layer(Q, K6)
    layer.bias.assign(RNG.normal(size=(7,)).astype("float32"))
    out = ops.convert_to_numpy(layer(Q, K6))
    w = weights(layer)
    expected = ref.additive_score(Q, K6, w["query_kernel"], w["key_kernel"], w["v"], w["bias"])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_concat_materialised_equals_split_and_additive():
    concat = scores.ConcatScore(5)
    out = ops.convert_to_numpy(concat(Q, K6))
    w = weights(concat)
    np.testing.assert_allclose(
        out, ref.concat_score(Q, K6, w["kernel"], w["v"], w["bias"]), rtol=1e-5, atol=1e-6
    )
    additive = scores.AdditiveScore(5)
    additive(Q, K6)
    additive.query_kernel.assign(w["kernel"][:4])
    additive.key_kernel.assign(w["kernel"][4:])
    additive.v.assign(w["v"])
    np.testing.assert_allclose(ops.convert_to_numpy(additive(Q, K6)), out, rtol=1e-5, atol=1e-6)


def test_prepare_keys_then_score_equals_call():
    for name in scores.SCORES:
        layer = scores.get(name)
        full = ops.convert_to_numpy(layer(Q, K))
        np.testing.assert_allclose(
            ops.convert_to_numpy(layer.score(Q, layer.prepare_keys(K))), full, rtol=1e-6
        )


TABLE_2_1 = {
    "dot": scores.DotScore,
    "general": scores.GeneralScore,
    "concat": scores.ConcatScore,
    "additive": scores.AdditiveScore,
    "cosine": scores.CosineScore,
    "scaled_dot": scores.ScaledDotScore,
    "biased_general": scores.BiasedGeneralScore,
    "activated_general": scores.ActivatedGeneralScore,
    "deep": scores.DeepScore,
    "location": scores.LocationScore,
    "feature": scores.FeatureScore,
}
# Beyond the classic table of scores: the general score with Vaswani et al.'s 1/sqrt(d) factor, and
# parametrized for Adam as q^T (I + W/d) k.
EXTRA = {
    "scaled_general": scores.ScaledGeneralScore,
    "residual_general": scores.ResidualGeneralScore,
}


def test_get_returns_every_table_2_1_score():
    assert scores.SCORES == {**TABLE_2_1, **EXTRA}
    for name, cls in scores.SCORES.items():
        assert type(scores.get(name)) is cls
        assert cls.__name__ in scores.__all__


@pytest.mark.parametrize("name", sorted({**TABLE_2_1, **EXTRA}))
def test_attention_with_every_score_masks_padding(name):
    values = RNG.normal(size=(2, 5, 4)).astype("float32")
    mask = np.array([[True, True, True, False, False], [False] * 5])  # row 1 fully padded
    layer = Attention(score=name)
    context, weights = layer(Q, values, value_mask=mask, return_attention_scores=True)
    context, weights = ops.convert_to_numpy(context), ops.convert_to_numpy(weights)
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    np.testing.assert_array_equal(weights[0, :, 3:], 0.0)
    np.testing.assert_allclose(weights[0].sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(weights[1], 0.0)
    np.testing.assert_array_equal(context[1], 0.0)
    noisy = values.copy()
    noisy[0, 3:] = 1e3 * RNG.normal(size=(2, 4))
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(Q, noisy, value_mask=mask))[0], context[0], rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("name", sorted({**TABLE_2_1, **EXTRA}))
@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_a_score_built_with_a_dtype_policy_serializes(name, policy):
    # Attention and the decoders build their scores with dtype=<their DTypePolicy>.
    units = {"units": 4} if name in ("additive", "concat") else {}
    score = scores.get(name, dtype=keras.DTypePolicy(policy), **units)
    layer = Attention(score=score)
    config = layer.get_config()
    assert config["score"]["config"]["dtype"]["config"]["name"] == policy
    clone = Attention.from_config(config)
    assert type(clone.score_fn) is type(score)
    assert clone.score_fn.dtype_policy.name == policy
    values = RNG.normal(size=(2, 5, 4)).astype("float32")
    weights = layer(Q, values, return_attention_scores=True)[1]
    clone(Q, values)
    for source, target in zip(layer.weights, clone.weights, strict=True):
        target.assign(source)
    cloned = clone(Q, values, return_attention_scores=True)[1]
    np.testing.assert_array_equal(ops.convert_to_numpy(cloned), ops.convert_to_numpy(weights))


def test_get_errors_and_instances():
    with pytest.raises(ValueError, match="Received: score='foo'"):
        scores.get("foo")
    instance = scores.GeneralScore()
    assert scores.get(instance) is instance
    assert isinstance(
        scores.get({"class_name": "keras_attn>DotScore", "config": {}}), scores.DotScore
    )


def test_additive_rejects_bad_units():
    with pytest.raises(ValueError, match="units=0"):
        scores.AdditiveScore(0)


@pytest.mark.parametrize(
    "cls,kwargs",
    [
        (scores.GeneralScore, {}),
        (scores.ScaledGeneralScore, {}),
        (scores.AdditiveScore, {"units": 6}),
        (scores.ConcatScore, {"units": 6}),
    ],
)
def test_harness(cls, kwargs):
    run_layer_test(
        cls,
        kwargs,
        {"query": Q, "keys": K6},
        weights_kwarg=None,
        expected_output_shape=(2, 3, 5),
        run_saved_model_check=cls is scores.AdditiveScore,
    )
