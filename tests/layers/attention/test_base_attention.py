import keras
import numpy as np
import pytest

from keras_attn import distributions, scores
from keras_attn.layers import Attention, BaseAttention, LocalAttention
from keras_attn.testing import run_layer_test
from tests.ops.numpy_distributions import sparsemax as numpy_sparsemax

RNG = np.random.default_rng(11)
Q = RNG.normal(size=(2, 4, 6)).astype("float32")
V = RNG.normal(size=(2, 7, 6)).astype("float32")
MASK = np.array([[True] * 7, [True] * 5 + [False] * 2])


def _step_by_step(layer, **options_of_step):
    """The weights `attention_weights` gives one query at a time, keys prepared once."""
    prepared = layer.prepare_keys(V)
    rows = []
    for t in range(Q.shape[1]):
        options = {name: option(t) for name, option in options_of_step.items()}
        rows.append(
            keras.ops.convert_to_numpy(
                layer.attention_weights(Q[:, t : t + 1], prepared, MASK, **options)
            )
        )
    return np.concatenate(rows, axis=1)


@pytest.mark.parametrize("score", ["dot", "general", "additive", "concat", "scaled_dot"])
@pytest.mark.parametrize("distribution", ["softmax", "sparsemax"])
def test_step_wise_weights_equal_the_full_call(score, distribution):
    layer = Attention(score=score, distribution=distribution)
    _, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    np.testing.assert_allclose(_step_by_step(layer), keras.ops.convert_to_numpy(weights), atol=1e-6)
    assert not layer.uses_query_positions


def test_step_wise_weights_give_padded_keys_exactly_zero():
    layer = Attention(score="general")
    layer(Q, V, value_mask=MASK)
    assert np.all(_step_by_step(layer)[1, :, 5:] == 0.0)


def test_local_m_takes_the_step_index_as_its_position():
    layer = LocalAttention(mode="monotonic", window=1, score="general")
    _, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    assert layer.uses_query_positions
    stepped = _step_by_step(layer, query_positions=lambda t: np.full((2, 1), t, "float32"))
    np.testing.assert_allclose(stepped, keras.ops.convert_to_numpy(weights), atol=1e-6)
    # Without the position every step would sit at p_t = 0: the window needs the step index.
    assert np.any(_step_by_step(layer)[:, 3] != stepped[:, 3])


def test_local_p_predicts_its_position_from_the_query():
    layer = LocalAttention(mode="predictive", window=2, score="dot")
    _, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    assert not layer.uses_query_positions
    np.testing.assert_allclose(_step_by_step(layer), keras.ops.convert_to_numpy(weights), atol=1e-6)


def test_prepare_keys_is_the_score_key_only_part():
    layer = Attention(score="general")
    layer(Q, V)
    expected = keras.ops.convert_to_numpy(layer.score_fn.prepare_keys(V))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer.prepare_keys(V)), expected)
    assert expected.shape == V.shape and not np.allclose(expected, V)


def test_a_built_score_keeps_its_weights_when_the_layer_builds():
    layer = Attention(score="general")
    layer.score_fn.build(Q.shape, V.shape)
    kernel = layer.score_fn.weights[0]
    layer.build(Q.shape, V.shape)
    assert layer.score_fn.weights == [kernel]
    assert isinstance(layer, BaseAttention)


@keras.saving.register_keras_serializable(package="tests")
class GeneralSparsemaxAttention(BaseAttention):
    """A structure written on the base alone: a general score and sparsemax, set in __init__."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.score_fn = scores.get("general", dtype=self.dtype_policy)
        self.distribution_fn = distributions.get("sparsemax", dtype=self.dtype_policy)


@pytest.mark.every_backend
def test_a_structure_written_on_the_base_passes_the_layer_harness():
    run_layer_test(
        GeneralSparsemaxAttention,
        {},
        {"query": Q, "value": V},
        mask=MASK,
        padded_input="value",
        mask_kwarg="value_mask",
        expected_output_shape=(2, 4, 6),
    )


def test_a_structure_written_on_the_base_computes_the_default_pipeline():
    layer = GeneralSparsemaxAttention()
    context, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    kernel = keras.ops.convert_to_numpy(layer.score_fn.kernel)
    expected_weights = numpy_sparsemax(
        np.einsum("bqi,ij,bkj->bqk", Q, kernel, V), np.broadcast_to(MASK[:, None, :], (2, 4, 7))
    )
    np.testing.assert_allclose(keras.ops.convert_to_numpy(weights), expected_weights, atol=1e-5)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(weights)[1, :, 5:], 0.0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(context), expected_weights @ V, atol=1e-5)
