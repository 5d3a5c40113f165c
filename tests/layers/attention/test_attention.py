import keras
import numpy as np
import pytest

from keras_attn.layers import Attention
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(2)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
V = RNG.normal(size=(2, 5, 4)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])


def test_dot_equals_keras_attention():
    layer = Attention(score="dot")
    ours, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    theirs, their_weights = keras.layers.Attention()(
        [Q, V], mask=[None, MASK], return_attention_scores=True
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(theirs), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(weights),
        keras.ops.convert_to_numpy(their_weights),
        rtol=1e-5,
        atol=1e-7,
    )


def test_additive_matches_numpy_reference():
    layer = Attention(score="additive")
    context, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    w = {x.name: keras.ops.convert_to_numpy(x) for x in layer.weights}
    scores = ref.additive_score(Q, V, w["query_kernel"], w["key_kernel"], w["v"], w["bias"])
    expected_context, expected_weights = ref.attention(scores, V, MASK[:, None, :])
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(context), expected_context, rtol=1e-5, atol=1e-6
    )
    assert np.all(keras.ops.convert_to_numpy(weights)[1, :, 3:] == 0.0)


def test_separate_keys_and_query_mask():
    keys = RNG.normal(size=(2, 5, 6)).astype("float32")
    layer = Attention(score="general")
    query_mask = np.array([[True, True, False], [True, True, True]])
    context = keras.ops.convert_to_numpy(layer(Q, V, key=keys, query_mask=query_mask))
    w = keras.ops.convert_to_numpy(layer.weights[0])
    expected, _ = ref.attention(ref.general_score(Q, keys, w), V)
    expected[0, 2] = 0.0
    np.testing.assert_allclose(context, expected, rtol=1e-5, atol=1e-6)


def test_keras_masking_from_embedding():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    _, weights = Attention()(embedded, embedded, return_attention_scores=True)
    model = keras.Model(tokens, weights)
    out = keras.ops.convert_to_numpy(model(np.array([[1, 2, 0, 0]])))
    np.testing.assert_array_equal(out[0, :, 2:], 0.0)
    np.testing.assert_allclose(out[0, :2].sum(-1), 1.0, rtol=1e-6)


def test_query_mask_flows_to_the_next_layer():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    context = Attention()(embedded, embedded)
    pooled = keras.layers.GlobalAveragePooling1D()(context)
    model = keras.Model(tokens, [context, pooled])
    context_out, pooled_out = model(np.array([[1, 2, 0, 0]]))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(pooled_out)[0],
        keras.ops.convert_to_numpy(context_out)[0, :2].mean(0),
        rtol=1e-6,
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="dropout=1.5"):
        Attention(dropout=1.5)
    with pytest.raises(ValueError, match="score='nope'"):
        Attention(score="nope")
    with pytest.raises(ValueError, match="distribution='nope'"):
        Attention(distribution="nope")


@pytest.mark.every_backend
@pytest.mark.parametrize("score", ["dot", "general", "concat", "additive"])
def test_harness(score):
    run_layer_test(
        Attention,
        {"score": score, "dropout": 0.1},
        {"query": Q, "value": V},
        mask=MASK,
        padded_input="value",
        mask_kwarg="value_mask",
        expected_output_shape=(2, 3, 4),
        run_saved_model_check=score in ("dot", "additive"),
    )


class _ShiftedScoreAttention(Attention):
    """Overrides one hook: the scores, shifted by a constant per key position."""

    def _calculate_scores(self, query, key):
        shift = keras.ops.arange(keras.ops.shape(key)[1], dtype="float32")
        return super()._calculate_scores(query, key) + shift


def test_a_subclass_overrides_only_the_score_hook():
    layer = _ShiftedScoreAttention(score="dot")
    context, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    scores = np.einsum("bqd,bkd->bqk", Q, V) + np.arange(5)
    expected_context, expected_weights = ref.attention(scores, V, MASK[:, None, :])
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(context), expected_context, rtol=1e-5, atol=1e-6
    )
    assert np.all(keras.ops.convert_to_numpy(weights)[1, :, 3:] == 0.0)


def test_structures_share_the_base_pipeline():
    from keras_attn.layers import (
        AreaAttention,
        BaseAttention,
        CompositionalDeAttention,
        HardAttention,
        LocalAttention,
    )

    for cls in (Attention, AreaAttention, CompositionalDeAttention, HardAttention, LocalAttention):
        assert issubclass(cls, BaseAttention)
        assert "call" not in vars(cls) or cls is LocalAttention


def _numpy(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


@pytest.mark.parametrize(
    "case",
    [
        {},
        {"value_mask": MASK, "query_mask": np.array([[True] * 3, [True, True, False]])},
        {"attention_mask": np.array([[[True] * 5] * 3, [[False] * 5] + [[True] * 5] * 2])},
    ],
    ids=["no_mask", "padding", "fully_masked_row"],
)
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_scaled_dot_fused_path_equals_explicit_path(case, policy):
    fused, explicit = (
        Attention(score="scaled_dot", use_fused_attention=flag, dtype=policy)
        for flag in (True, False)
    )
    assert fused.uses_fused_attention() and not explicit.uses_fused_attention()
    got, expected = fused(Q, V, **case), explicit(Q, V, **case)
    assert keras.backend.standardize_dtype(got.dtype) == fused.compute_dtype
    tol = {"float32": 1e-5, "mixed_bfloat16": 5e-2}[policy]  # MIXED_PRECISION_TOLERANCES
    np.testing.assert_allclose(_numpy(got), _numpy(expected), atol=tol, rtol=tol)
    if "attention_mask" in case:  # the query with no key to see gets a zero context
        assert np.all(_numpy(got)[1, 0] == 0.0)


def test_fused_path_applies_only_to_the_scaled_dot_softmax_pipeline():
    def fused(**kwargs):
        return Attention(use_fused_attention=True, **kwargs)

    assert fused(score="scaled_dot").uses_fused_attention()
    assert not fused(score="scaled_dot").uses_fused_attention(return_attention_scores=True)
    assert not fused(score="dot").uses_fused_attention()
    assert not fused(score="scaled_dot", distribution="sparsemax").uses_fused_attention()
    with_dropout = fused(score="scaled_dot", dropout=0.2)
    assert with_dropout.uses_fused_attention(training=False)
    assert not with_dropout.uses_fused_attention(training=True)

    class Shifted(Attention):
        def _calculate_scores(self, query, key):
            return super()._calculate_scores(query, key) + 1.0

    assert not Shifted(score="scaled_dot", use_fused_attention=True).uses_fused_attention()
    automatic = Attention(score="scaled_dot")
    assert automatic.uses_fused_attention() == (keras.config.backend() in ("jax", "torch"))
    assert automatic.get_config()["use_fused_attention"] is None
    config = fused(score="scaled_dot").get_config()
    assert Attention.from_config(config).use_fused_attention is True
    with pytest.raises(ValueError, match="use_fused_attention=1"):
        Attention(use_fused_attention=1)


def test_fused_path_falls_back_when_values_are_wider_than_keys(monkeypatch):
    calls = []
    fused_op = keras.ops.dot_product_attention
    monkeypatch.setattr(
        keras.ops, "dot_product_attention", lambda *a, **k: calls.append(1) or fused_op(*a, **k)
    )
    layer = Attention(score="scaled_dot", use_fused_attention=True)
    wide = RNG.normal(size=(2, 5, 6)).astype("float32")
    context = layer(Q, wide, key=V, value_mask=MASK)
    assert calls == [] and tuple(context.shape) == (2, 3, 6)
    layer(Q, V, value_mask=MASK)
    assert calls == [1]
