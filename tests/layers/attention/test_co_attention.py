import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers.attention.co_attention import CoAttention
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.ops import numpy_distributions

RNG = np.random.default_rng(5)
A = RNG.normal(size=(2, 3, 4)).astype("float32")
B = RNG.normal(size=(2, 5, 6)).astype("float32")
A_MASK = np.array([[True, True, True], [True, True, False]])
B_MASK = np.array([[True] * 5, [True, True, True, False, False]])


def numpy_co_attention(affinity, a, b, a_mask, b_mask):
    """DCN (Xiong et al., 2017) eqs. 2-3 on one affinity matrix, restricted to real pairs."""
    pairs = a_mask[:, :, None] & b_mask[:, None, :]
    weights_a = ref.softmax(affinity, pairs)
    weights_b = np.swapaxes(
        ref.softmax(np.swapaxes(affinity, 1, 2), np.swapaxes(pairs, 1, 2)), 1, 2
    )
    context_a = np.einsum("bij,bjd->bid", weights_a, b)
    context_b = np.einsum("bij,bid->bjd", weights_b, a)
    return context_a, context_b, weights_a, weights_b


def test_general_matches_numpy_reference():
    layer = CoAttention(score="general")
    (context_a, context_b), weights = layer(
        A, B, a_mask=A_MASK, b_mask=B_MASK, return_attention_scores=True
    )
    affinity = ref.general_score(
        A.astype(np.float64), B, ops.convert_to_numpy(layer.score_fn.kernel)
    )
    expected = numpy_co_attention(affinity, A, B, A_MASK, B_MASK)
    np.testing.assert_allclose(ops.convert_to_numpy(context_a), expected[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(context_b), expected[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights)[:, 0], expected[2], rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights)[:, 1], expected[3], rtol=1e-5, atol=1e-7
    )
    # Padding on either side: zero weights and zero contexts, distributions over real positions.
    assert np.all(ops.convert_to_numpy(weights)[1, :, 2, :] == 0.0)
    assert np.all(ops.convert_to_numpy(weights)[1, :, :, 3:] == 0.0)
    assert np.all(ops.convert_to_numpy(context_a)[1, 2] == 0.0) and np.all(
        ops.convert_to_numpy(context_b)[1, 3:] == 0.0
    )
    np.testing.assert_allclose(ops.convert_to_numpy(weights)[1, 0, :2].sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(weights)[1, 1, :, :3].sum(-2), 1.0, rtol=1e-6)


def test_dot_affinity_is_dcn_and_symmetric():
    b = RNG.normal(size=(2, 5, 4)).astype("float32")
    layer = CoAttention(score="dot")
    forward = layer(A, b, a_mask=A_MASK, b_mask=B_MASK, return_attention_scores=True)
    backward = layer(b, A, a_mask=B_MASK, b_mask=A_MASK, return_attention_scores=True)
    expected = numpy_co_attention(ref.dot_score(A, b), A, b, A_MASK, B_MASK)
    np.testing.assert_allclose(
        ops.convert_to_numpy(forward[0][0]), expected[0], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(forward[0][1]), expected[1], rtol=1e-5, atol=1e-6
    )
    # Swapping the sequences swaps the contexts (the dot affinity is symmetric).
    np.testing.assert_allclose(
        ops.convert_to_numpy(backward[0][0]),
        ops.convert_to_numpy(forward[0][1]),
        rtol=1e-6,
        atol=1e-7,
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(backward[0][1]),
        ops.convert_to_numpy(forward[0][0]),
        rtol=1e-6,
        atol=1e-7,
    )


def test_one_direction_equals_keras_attention():
    b = RNG.normal(size=(2, 5, 4)).astype("float32")
    (context_a, _), weights = CoAttention(score="dot")(
        A, b, b_mask=B_MASK, return_attention_scores=True
    )
    theirs, their_weights = keras.layers.Attention()(
        [A, b], mask=[None, B_MASK], return_attention_scores=True
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(context_a), ops.convert_to_numpy(theirs), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights)[:, 0],
        ops.convert_to_numpy(their_weights),
        rtol=1e-5,
        atol=1e-7,
    )


def test_sparsemax_distribution_normalises_both_directions():
    layer = CoAttention(score="general", distribution="sparsemax")
    (context_a, context_b), weights = layer(
        A, B, a_mask=A_MASK, b_mask=B_MASK, return_attention_scores=True
    )
    affinity = ref.general_score(
        A.astype(np.float64), B, ops.convert_to_numpy(layer.score_fn.kernel)
    )
    pairs = A_MASK[:, :, None] & B_MASK[:, None, :]
    expected_a = numpy_distributions.sparsemax(affinity, pairs)
    expected_b = np.swapaxes(
        numpy_distributions.sparsemax(np.swapaxes(affinity, 1, 2), np.swapaxes(pairs, 1, 2)), 1, 2
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights)[:, 0], expected_a, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights)[:, 1], expected_b, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(context_b),
        np.einsum("bij,bid->bjd", expected_b, A),
        rtol=1e-5,
        atol=1e-5,
    )
    assert np.any(ops.convert_to_numpy(weights)[0, 0] == 0.0) and np.all(
        ops.convert_to_numpy(weights)[1, :, 2] == 0.0
    )


def test_fully_masked_side_gives_zeros_not_nan():
    (context_a, context_b), weights = CoAttention()(
        A, B, b_mask=np.zeros((2, 5), bool), return_attention_scores=True
    )
    for x in (context_a, context_b, weights):
        np.testing.assert_array_equal(ops.convert_to_numpy(x), 0.0)


def numpy_dcn_coattention(document, question, document_mask, question_mask):
    """DCN (Xiong et al., 2017) section 2.2 in its own column layout, one example at a time.

    D `(l, m)`, Q `(l, n)`, L = D^T Q; A^Q = softmax(L) column-wise (over the document, for each
    question word), A^D = softmax(L^T) column-wise (over the question, for each document word);
    C^Q = D A^Q `(l, n)`, C^D = [Q; C^Q] A^D `(2l, m)`. Padded words take no part.
    """
    c_q, c_d = [], []
    for d, q, dm, qm in zip(document, question, document_mask, question_mask, strict=True):
        d, q = d.T.astype(np.float64), q.T.astype(np.float64)  # (l, m), (l, n)
        affinity = d.T @ q  # (m, n)
        pairs = dm[:, None] & qm[None, :]
        a_q = ref.softmax(affinity.T, pairs.T).T  # (m, n), columns over the document
        a_d = ref.softmax(affinity, pairs).T  # (n, m), columns over the question
        summaries = d @ a_q  # C^Q (l, n)
        c_q.append(summaries.T)
        c_d.append((np.concatenate([q, summaries], axis=0) @ a_d).T)  # C^D^T (m, 2l)
    return np.stack(c_d), np.stack(c_q)


def test_second_level_is_dcn_coattention_context():
    question = RNG.normal(size=(2, 5, 4)).astype("float32")
    layer = CoAttention(score="dot", second_level=True)
    (context_a, context_b), weights = layer(
        A, question, a_mask=A_MASK, b_mask=B_MASK, return_attention_scores=True
    )
    expected_c_d, expected_c_q = numpy_dcn_coattention(A, question, A_MASK, B_MASK)
    assert tuple(context_a.shape) == (2, 3, 8)
    np.testing.assert_allclose(ops.convert_to_numpy(context_a), expected_c_d, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(context_b), expected_c_q, rtol=1e-5, atol=1e-6)
    # The first half is the first level's context, the weights are the first level's.
    first = CoAttention(score="dot")
    (first_a, _), first_weights = first(
        A, question, a_mask=A_MASK, b_mask=B_MASK, return_attention_scores=True
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(context_a)[..., :4],
        ops.convert_to_numpy(first_a),
        rtol=1e-6,
        atol=1e-7,
    )
    np.testing.assert_array_equal(
        ops.convert_to_numpy(weights), ops.convert_to_numpy(first_weights)
    )
    assert np.all(ops.convert_to_numpy(context_a)[1, 2] == 0.0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="score='bilinear'"):
        CoAttention(score="bilinear")
    with pytest.raises(ValueError, match="distribution='max'"):
        CoAttention(distribution="max")
    with pytest.raises(ValueError, match="second_level=1"):
        CoAttention(second_level=1)


@pytest.mark.parametrize("score", ["general", "additive"])
def test_harness(score):
    run_layer_test(
        CoAttention,
        {"score": score, "distribution": "softmax" if score == "general" else "sparsemax"},
        {"a": A, "b": B},
        mask=B_MASK,
        padded_input="b",
        expected_output_shape=((2, 3, 6), (2, 5, 4)),
        run_saved_model_check=score == "general",
    )


@pytest.mark.every_backend
def test_harness_explicit_mask_on_a():
    run_layer_test(
        CoAttention,
        {"score": "dot"},
        {"b": B[..., :4], "a": A},
        mask=A_MASK,
        padded_input="a",
        mask_kwarg="a_mask",
        weights_kwarg=None,
        run_saved_model_check=False,
        run_mixed_precision_check=False,
    )


def test_harness_second_level_weights_masked_along_a():
    # Padding in `a` masks rows of both stacked normalisations: weights_mask (batch, T_a, 1)
    # lines up with the weights' trailing (T_a, T_b) axes.
    run_layer_test(
        CoAttention,
        {"score": "general", "second_level": True},
        {"a": A, "b": B},
        mask=A_MASK,
        padded_input="a",
        mask_kwarg="a_mask",
        weights_mask=lambda mask: mask[:, :, None],
        expected_output_shape=((2, 3, 6 + 4), (2, 5, 4)),
        run_saved_model_check=False,
    )
