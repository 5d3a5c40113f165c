import keras
import numpy as np
import pytest

from keras_attn.ops import dot_product_attention, fused_attention_by_default
from tests import numpy_reference as ref

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(3)
Q = RNG.normal(size=(2, 3, 2, 4)).astype("float32")  # (batch, T_q, heads, e)
K = RNG.normal(size=(2, 5, 2, 4)).astype("float32")
V = RNG.normal(size=(2, 5, 2, 4)).astype("float32")


def expected(mask=None, scale=0.5):
    scores = np.einsum("bqhe,bkhe->bhqk", Q, K) * scale
    weights = ref.softmax(scores, mask)  # exactly zero on masked keys and fully masked rows
    return np.einsum("bhqk,bkhe->bqhe", weights, V)


def test_matches_numpy_softmax_attention_with_masks():
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(dot_product_attention(Q, K, V)), expected(), atol=1e-5
    )
    mask = RNG.random(size=(2, 1, 3, 5)) > 0.3
    mask[1, 0, 2] = False  # a query row with no key to see: zero output, not the mean value
    got = keras.ops.convert_to_numpy(dot_product_attention(Q, K, V, mask=mask, scale=0.3))
    np.testing.assert_allclose(got, expected(mask, scale=0.3), atol=1e-5)
    assert np.all(got[1, 2] == 0.0)


def test_a_padding_mask_broadcast_over_queries_and_heads():
    """(batch, 1, 1, T_k): on JAX it is broadcast over the queries for cuDNN's kernel."""
    mask = np.array([[True] * 5, [True, True, False, False, False]]).reshape(2, 1, 1, 5)
    got = keras.ops.convert_to_numpy(dot_product_attention(Q, K, V, mask=mask))
    np.testing.assert_allclose(got, expected(mask), atol=1e-5)


def test_mask_of_another_rank_is_refused():
    with pytest.raises(ValueError, match=r"mask.shape=\(2, 5\)"):
        dot_product_attention(Q, K, V, mask=np.ones((2, 5), bool))


def test_default_path_per_backend():
    assert fused_attention_by_default() == (keras.config.backend() in ("jax", "torch"))
