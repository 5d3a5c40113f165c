"""ParallelCoAttention: Lu et al.'s parallel co-attention against NumPy, the layer harness, masks
and arguments."""

import numpy as np
import pytest
from keras import ops

from keras_attn.layers import ParallelCoAttention
from keras_attn.testing import run_layer_test
from tests.numpy_reference import parallel_co_attention

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(0)
V = RNG.normal(size=(2, 9, 5)).astype("float32")
Q = RNG.normal(size=(2, 4, 3)).astype("float32")
Q_MASK = np.array([[True] * 4, [True, True, False, False]])


def layer_weights(layer):
    """`(W_b, W_v, W_q, w_hv, w_hq)` of a built layer, as NumPy arrays."""
    return (
        ops.convert_to_numpy(layer.co_attention.score_fn.kernel),
        ops.convert_to_numpy(layer.region_projection.kernel),
        ops.convert_to_numpy(layer.word_projection.kernel),
        ops.convert_to_numpy(layer.region_score.kernel)[:, 0],
        ops.convert_to_numpy(layer.word_score.kernel)[:, 0],
    )


def test_matches_numpy_reference():
    layer = ParallelCoAttention(3)
    layer(V, Q, words_mask=Q_MASK)  # builds
    rng = np.random.default_rng(1)
    for weight in layer.weights:  # large scores: weights far from uniform
        weight.assign(rng.normal(scale=2.0, size=weight.shape).astype("float32"))
    (v_hat, q_hat), (a_v, a_q) = layer(V, Q, words_mask=Q_MASK, return_attention_scores=True)
    want = parallel_co_attention(
        V.astype("float64"), Q.astype("float64"), Q_MASK, *layer_weights(layer)
    )
    for got, expected in zip((v_hat, q_hat, a_v, a_q), want, strict=True):
        np.testing.assert_allclose(ops.convert_to_numpy(got), expected, atol=1e-5, rtol=1e-5)
    assert np.all(ops.convert_to_numpy(a_q)[~Q_MASK] == 0.0)
    assert np.abs(want[2] - 1 / 9).max() > 0.05  # not the trivial uniform case


def test_passes_the_layer_harness():
    run_layer_test(
        ParallelCoAttention,
        {"units": 3},
        {"regions": V, "words": Q},
        mask=Q_MASK,
        padded_input="words",
        weights_kwarg=None,  # two weight maps of different shapes: checked above
        expected_output_shape=((2, 5), (2, 3)),
        # The check trains on the first output, v_hat, which w_hq does not reach (q_hat does);
        # tests/training/test_question_answering_task.py trains the whole answerer.
        run_training_check=False,
    )


def test_a_question_without_words_gives_finite_weights():
    layer = ParallelCoAttention(3)
    (v_hat, q_hat), (a_v, a_q) = layer(
        V, Q, words_mask=np.zeros((2, 4), bool), return_attention_scores=True
    )
    assert np.all(np.isfinite(ops.convert_to_numpy(v_hat)))
    assert np.all(ops.convert_to_numpy(q_hat) == 0.0)
    np.testing.assert_allclose(ops.convert_to_numpy(a_v).sum(-1), 1.0, atol=1e-6)
    assert np.all(ops.convert_to_numpy(a_q) == 0.0)


@pytest.mark.parametrize("units", [0, -1, 2.5, True])
def test_bad_units_are_refused(units):
    with pytest.raises(ValueError, match=f"Received: units={units!r}"):
        ParallelCoAttention(units)
