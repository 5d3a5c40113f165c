import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers.attention.multi_dimensional_attention import MultiDimensionalAttention
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(6)
X = RNG.normal(size=(2, 5, 4)).astype("float32")
MASK = np.array([[True] * 5, [True, False, True, True, False]])


def elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def numpy_multi_dimensional(x, mask, w1, b1, w2, b2):
    """DiSAN source2token: f(x_i) = W2 elu(W1 x_i + b1) + b2, a softmax per feature."""
    scores = elu(x.astype(np.float64) @ w1 + b1) @ w2 + b2  # (batch, T, d)
    weights = ref.softmax(np.swapaxes(scores, 1, 2), mask[:, None, :])  # (batch, d, T)
    return np.einsum("bdt,btd->bd", weights, x), weights


def built_layer(units=6):
    layer = MultiDimensionalAttention(units)
    layer.build(X.shape)
    layer.hidden_bias.assign(RNG.normal(size=(units,)).astype("float32"))
    layer.score_bias.assign(RNG.normal(size=(4,)).astype("float32"))
    return layer


def test_matches_numpy_reference():
    layer = built_layer()
    pooled, weights = layer(X, mask=MASK, return_attention_scores=True)
    expected, expected_weights = numpy_multi_dimensional(X, MASK, *layer.get_weights())
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(ops.convert_to_numpy(pooled), expected, rtol=1e-5, atol=1e-6)
    assert np.all(ops.convert_to_numpy(weights)[1][:, ~MASK[1]] == 0.0)
    np.testing.assert_allclose(ops.convert_to_numpy(weights).sum(-1), 1.0, rtol=1e-6)
    # The features really get different distributions over the tokens.
    assert np.ptp(ops.convert_to_numpy(weights)[0], axis=0).max() > 1e-3


def test_identical_feature_scores_reduce_to_scalar_attention():
    layer = built_layer()
    w1, b1, w2, _ = layer.get_weights()
    column = w2[:, :1]
    layer.score_kernel.assign(np.repeat(column, 4, axis=1))
    layer.score_bias.assign(np.zeros(4, "float32"))
    pooled, weights = layer(X, mask=MASK, return_attention_scores=True)
    token_weights = ref.softmax((elu(X @ w1 + b1) @ column)[..., 0], MASK)  # (batch, T)
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), np.repeat(token_weights[:, None], 4, 1), rtol=1e-5, atol=1e-7
    )
    expected = np.einsum("bt,btd->bd", token_weights, X)
    np.testing.assert_allclose(ops.convert_to_numpy(pooled), expected, rtol=1e-5, atol=1e-6)


def test_keras_masking_and_fully_masked_row():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    pooled, weights = MultiDimensionalAttention(3)(embedded, return_attention_scores=True)
    model = keras.Model(tokens, [pooled, weights])
    pooled, weights = model(np.array([[1, 2, 0, 0], [0, 0, 0, 0]]))
    np.testing.assert_array_equal(ops.convert_to_numpy(weights)[0, :, 2:], 0.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(weights)[1], 0.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(pooled)[1], 0.0)


QUERY = RNG.normal(size=(2, 3, 7)).astype("float32")  # (batch, T_q, d_q)
QUERY_MASK = np.array([[True, True, True], [True, True, False]])


def numpy_query_conditioned(x, query, mask, w1, b1, w2, b2, wq):
    """DiSAN f(x_i, q) = W^T elu(W1 x_i + W2 q + b1) + b, a softmax over tokens per feature."""
    x, query = x.astype(np.float64), query.astype(np.float64)
    batch, tokens, depth = x.shape
    scores = np.zeros((batch, query.shape[1], depth, tokens))
    for b in range(batch):
        for t in range(query.shape[1]):
            for i in range(tokens):
                scores[b, t, :, i] = elu(w1.T @ x[b, i] + wq.T @ query[b, t] + b1) @ w2 + b2
    weights = ref.softmax(scores, mask[:, None, None, :])  # (batch, T_q, d, T)
    return np.einsum("bqdt,btd->bqd", weights, x), weights


def test_query_conditioned_form_matches_numpy_reference():
    layer = MultiDimensionalAttention(6)
    layer(X, query=QUERY)
    for weight in (layer.hidden_bias, layer.score_bias):
        weight.assign(RNG.normal(size=weight.shape).astype("float32"))
    pooled, weights = layer(X, query=QUERY, mask=MASK, return_attention_scores=True)
    w1, b1, wq, w2, b2 = (
        ops.convert_to_numpy(w)
        for w in (
            layer.hidden_kernel,
            layer.hidden_bias,
            layer.query_kernel,
            layer.score_kernel,
            layer.score_bias,
        )
    )
    expected, expected_weights = numpy_query_conditioned(X, QUERY, MASK, w1, b1, w2, b2, wq)
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(ops.convert_to_numpy(pooled), expected, rtol=1e-5, atol=1e-6)
    assert np.all(ops.convert_to_numpy(weights)[1][..., ~MASK[1]] == 0.0)
    # Different queries give different distributions: the query really conditions the scores.
    assert (
        np.abs(ops.convert_to_numpy(weights)[:, 0] - ops.convert_to_numpy(weights)[:, 1]).max()
        > 1e-3
    )
    # Padded queries get a zero output.
    masked = ops.convert_to_numpy(layer(X, query=QUERY, mask=MASK, query_mask=QUERY_MASK))
    np.testing.assert_array_equal(masked[1, 2], 0.0)
    np.testing.assert_allclose(masked[QUERY_MASK], expected[QUERY_MASK], rtol=1e-5, atol=1e-6)
    # Without a query the same layer is the source2token form (no W_q term).
    source2token, _ = numpy_multi_dimensional(X, MASK, w1, b1, w2, b2)
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(X, mask=MASK)), source2token, rtol=1e-5, atol=1e-6
    )


def test_token2token_queries_and_keras_masks():
    # Queries = the tokens: DiSAN's token2token form; the Keras mask of each input reaches it.
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    layer = MultiDimensionalAttention(3)
    outputs, weights = layer(embedded, query=embedded, return_attention_scores=True)
    model = keras.Model(tokens, [outputs, weights])
    ids = np.array([[1, 2, 3, 0], [4, 0, 0, 0]])
    outputs, weights = model(ids)
    assert tuple(weights.shape) == (2, 4, 4, 4)
    np.testing.assert_array_equal(ops.convert_to_numpy(weights)[0, ..., 3], 0.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(outputs)[0, 3], 0.0)  # padded query
    np.testing.assert_array_equal(ops.convert_to_numpy(outputs)[1, 1:], 0.0)
    np.testing.assert_allclose(ops.convert_to_numpy(weights)[1, 0, :, 0], 1.0)


def test_query_on_a_layer_built_without_one_is_rejected():
    layer = MultiDimensionalAttention(3)
    layer(X)
    with pytest.raises(ValueError, match="built without a query"):
        layer(X, query=QUERY)


def test_bad_arguments():
    with pytest.raises(ValueError, match="units=-1"):
        MultiDimensionalAttention(-1)
    with pytest.raises(ValueError, match="activation='nope'"):
        MultiDimensionalAttention(4, activation="nope")


@pytest.mark.every_backend
def test_harness():
    run_layer_test(
        MultiDimensionalAttention,
        {"units": 6, "activation": "elu"},
        {"inputs": X},
        mask=MASK,
        padded_input="inputs",
        expected_output_shape=(2, 4),
        run_saved_model_check=True,
    )


def test_harness_query_conditioned():
    run_layer_test(
        MultiDimensionalAttention,
        {"units": 6, "activation": "tanh"},
        {"inputs": X, "query": QUERY},
        mask=MASK,
        padded_input="inputs",
        expected_output_shape=(2, 3, 4),
        run_saved_model_check=True,
    )
