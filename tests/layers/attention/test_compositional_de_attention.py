import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers.attention.compositional_de_attention import CompositionalDeAttention
from keras_attn.testing import run_layer_test

RNG = np.random.default_rng(6)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
V = RNG.normal(size=(2, 5, 6)).astype("float32")
K = RNG.normal(size=(2, 5, 4)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])


def coda_reference(query, key, value, w_e, w_n, alpha, beta, mask=None, centre=False):
    """Tay et al. (2019): E = a (q W_E)(k W_E)^T, N = -b ||q W_N - k W_N||_1, M = tanh(E) sig(N).

    With `centre`, N minus its mean over the allowed pairs of each example (one by one).
    """
    query, key, value = (x.astype("float64") for x in (query, key, value))
    q_e, k_e, q_n, k_n = query @ w_e, key @ w_e, query @ w_n, key @ w_n
    e = alpha * np.einsum("bqd,bkd->bqk", q_e, k_e)
    n = -beta * np.abs(q_n[:, :, None, :] - k_n[:, None, :, :]).sum(-1)
    if centre:
        allowed = np.ones(n.shape, bool) if mask is None else np.broadcast_to(mask, n.shape)
        n = np.stack([n[b] - n[b][allowed[b]].mean() for b in range(len(n))])
    m = np.tanh(e) / (1 + np.exp(-n))
    if mask is not None:
        m = np.where(mask, m, 0.0)
    return m @ value, m


def test_matches_numpy_reference_with_projections_and_default_scales():
    layer = CompositionalDeAttention(units=8)
    output, weights = layer(Q, V, key=K, value_mask=MASK, return_attention_scores=True)
    w_e = ops.convert_to_numpy(layer.affinity_projection.kernel)
    w_n = ops.convert_to_numpy(layer.dissimilarity_projection.kernel)
    expected_output, expected_weights = coda_reference(
        Q, K, V, w_e, w_n, 1 / np.sqrt(8), 1 / 8, MASK[:, None, :]
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(ops.convert_to_numpy(output), expected_output, rtol=1e-5, atol=1e-5)
    assert np.all(ops.convert_to_numpy(weights)[1, :, 3:] == 0.0)


def test_identity_features_and_explicit_scales():
    layer = CompositionalDeAttention(affinity_scale=0.7, dissimilarity_scale=0.3)
    output, weights = layer(Q, V, key=K, return_attention_scores=True)
    eye = np.eye(4)
    expected_output, expected_weights = coda_reference(Q, K, V, eye, eye, 0.7, 0.3)
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(ops.convert_to_numpy(output), expected_output, rtol=1e-5, atol=1e-5)
    assert layer.weights == []


def test_centred_dissimilarity_matches_numpy_and_gates_above_one_half():
    layer = CompositionalDeAttention(units=8, centre_dissimilarity=True)
    output, weights = layer(Q, V, key=K, value_mask=MASK, return_attention_scores=True)
    w_e = ops.convert_to_numpy(layer.affinity_projection.kernel)
    w_n = ops.convert_to_numpy(layer.dissimilarity_projection.kernel)
    expected_output, expected_weights = coda_reference(
        Q, K, V, w_e, w_n, 1 / np.sqrt(8), 1 / 8, MASK[:, None, :], centre=True
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(ops.convert_to_numpy(output), expected_output, rtol=1e-5, atol=1e-5)
    # The gate now exceeds 1/2 for keys nearer than average: |M| > 1/2 happens with large E.
    strong = CompositionalDeAttention(affinity_scale=3.0, centre_dissimilarity=True)
    _, strong_weights = strong(Q, K, return_attention_scores=True)
    assert np.abs(ops.convert_to_numpy(strong_weights)).max() > 0.5
    # Padded keys take no part in the mean: their values do not matter.
    noisy_k = np.where(MASK[..., None], K, 1e3 * RNG.normal(size=K.shape)).astype("float32")
    noisy = ops.convert_to_numpy(layer(Q, V, key=noisy_k, value_mask=MASK))
    np.testing.assert_allclose(noisy, ops.convert_to_numpy(output), rtol=1e-5, atol=1e-6)


def test_weights_are_signed_bounded_and_not_normalised():
    _, weights = CompositionalDeAttention(affinity_scale=2.0)(Q, K, return_attention_scores=True)
    weights = ops.convert_to_numpy(weights)
    assert np.all(np.abs(weights) <= 0.5)  # |tanh| <= 1 and sigmoid(N <= 0) <= 1/2
    assert weights.min() < 0 < weights.max()
    assert not np.allclose(weights.sum(-1), 1.0)


def test_query_mask_and_attention_mask():
    attention_mask = RNG.random((2, 3, 5)) > 0.4
    query_mask = np.array([[True, False, True], [True, True, True]])
    layer = CompositionalDeAttention(units=8)
    output, weights = layer(
        Q,
        V,
        key=K,
        query_mask=query_mask,
        value_mask=MASK,
        attention_mask=attention_mask,
        return_attention_scores=True,
    )
    allowed = attention_mask & MASK[:, None, :]
    assert np.all(ops.convert_to_numpy(weights)[~allowed] == 0.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(output)[0, 1], 0.0)


def test_keras_masking_from_embedding():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    _, weights = CompositionalDeAttention()(embedded, embedded, return_attention_scores=True)
    out = ops.convert_to_numpy(keras.Model(tokens, weights)(np.array([[1, 2, 0, 0]])))
    np.testing.assert_array_equal(out[0, :, 2:], 0.0)
    assert np.all(out[0, :2, :2] != 0.0)


@pytest.mark.parametrize("dtype", ["float32", "mixed_float16"])
def test_fully_masked_row_gives_zeros_not_nan(dtype):
    mask = MASK.copy()
    mask[1] = False
    layer = CompositionalDeAttention(units=8, dtype=dtype)
    output, weights = layer(Q * 100, V, key=K * 100, value_mask=mask, return_attention_scores=True)
    output, weights = (
        keras.ops.convert_to_numpy(output).astype("float32"),
        keras.ops.convert_to_numpy(weights).astype("float32"),
    )
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
    np.testing.assert_array_equal(weights[1], 0.0)
    np.testing.assert_array_equal(output[1], 0.0)


def test_harness_with_projections():
    run_layer_test(
        CompositionalDeAttention,
        {"units": 8, "dissimilarity_scale": 0.5},
        {"query": Q, "value": V, "key": K},
        mask=MASK,
        padded_input="value",
        mask_kwarg="value_mask",
        expected_output_shape=(2, 3, 6),
        run_saved_model_check=True,
    )


@pytest.mark.every_backend
def test_harness_self_attention_with_keras_masking():
    run_layer_test(
        CompositionalDeAttention,
        {"centre_dissimilarity": True},
        {"query": K, "value": K},
        mask=MASK,
        padded_input="value",
        expected_output_shape=(2, 5, 4),
        run_saved_model_check=False,
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="units=0"):
        CompositionalDeAttention(units=0)
    with pytest.raises(ValueError, match="affinity_scale=-1.0"):
        CompositionalDeAttention(affinity_scale=-1.0)
    with pytest.raises(ValueError, match="dissimilarity_scale='x'"):
        CompositionalDeAttention(dissimilarity_scale="x")
    with pytest.raises(ValueError, match="centre_dissimilarity='yes'"):
        CompositionalDeAttention(centre_dissimilarity="yes")
    with pytest.raises(ValueError, match="same feature size"):
        CompositionalDeAttention()(Q, V)
    with pytest.raises(ValueError, match="same feature size"):
        CompositionalDeAttention(units=8)(Q, V)
