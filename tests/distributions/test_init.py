import keras
import numpy as np
import pytest
from keras import ops

from keras_attn import distributions
from keras_attn.layers import Attention
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.ops import numpy_distributions as sparse_ref

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(5)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
V = RNG.normal(size=(2, 5, 4)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])

EXPECTED_WEIGHTS = {
    "softmax": lambda s, m: ref.softmax(s, m),
    "sigmoid": lambda s, m: np.where(m, ref.sigmoid(s), 0.0),
    "sparsemax": sparse_ref.sparsemax,
    "entmax15": lambda s, m: sparse_ref.entmax(s, 1.5, m),
    "entmax": lambda s, m: sparse_ref.entmax(s, 1.5, m),
    "hardmax": lambda s, m: np.eye(s.shape[-1])[np.argmax(np.where(m, s, -np.inf), -1)],
}


def test_table_names_every_distribution():
    assert sorted(distributions.DISTRIBUTIONS) == sorted(EXPECTED_WEIGHTS)
    for name, cls in distributions.DISTRIBUTIONS.items():
        assert isinstance(distributions.get(name), cls)


@pytest.mark.parametrize("name", sorted(EXPECTED_WEIGHTS))
def test_attention_by_name_matches_numpy(name):
    layer = Attention(score="dot", distribution=name)
    context, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    scores = ref.dot_score(Q, V)
    mask = np.broadcast_to(MASK[:, None, :], scores.shape)
    expected = EXPECTED_WEIGHTS[name](scores, mask)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), expected, atol=2e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(context), expected @ V, atol=1e-5)
    assert np.all(ops.convert_to_numpy(weights)[1, :, 3:] == 0.0)


@pytest.mark.parametrize("name", ["sparsemax", "entmax"])
def test_attention_harness_with_sparse_distribution(name):
    run_layer_test(
        Attention,
        {"score": "general", "distribution": name},
        {"query": Q, "value": V},
        mask=MASK,
        padded_input="value",
        mask_kwarg="value_mask",
        expected_output_shape=(2, 3, 4),
        run_saved_model_check=False,
    )


@pytest.mark.parametrize("name", sorted(EXPECTED_WEIGHTS))
@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_a_distribution_built_with_a_dtype_policy_serializes(name, policy):
    # Attention and the decoders build their distributions with dtype=<their DTypePolicy>.
    distribution = distributions.get(name, dtype=keras.DTypePolicy(policy))
    layer = Attention(score="dot", distribution=distribution)
    config = layer.get_config()
    assert config["distribution"]["config"]["dtype"]["config"]["name"] == policy
    clone = Attention.from_config(config)
    assert type(clone.distribution_fn) is type(distribution)
    assert clone.distribution_fn.dtype_policy.name == policy
    weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)[1]
    cloned = clone(Q, V, value_mask=MASK, return_attention_scores=True)[1]
    np.testing.assert_array_equal(ops.convert_to_numpy(cloned), ops.convert_to_numpy(weights))
