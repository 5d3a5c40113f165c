import keras
import numpy as np
import pytest
from keras import ops

from keras_attn import ops as attn_ops
from tests import numpy_reference as ref
from tests.lazy_tf import tf
from tests.ops import numpy_distributions as sparse_ref

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(1)


def test_softmax_matches_numpy_with_mask():
    scores = RNG.normal(size=(3, 4, 6)).astype("float32")
    mask = RNG.random((3, 4, 6)) > 0.3
    mask[:, :, 0] = True
    out = ops.convert_to_numpy(attn_ops.softmax(scores, mask=mask))
    np.testing.assert_allclose(out, ref.softmax(scores, mask), rtol=1e-5, atol=1e-7)
    assert np.all(out[~mask] == 0.0)
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-6)


def test_softmax_without_mask():
    scores = RNG.normal(size=(2, 5)).astype("float32")
    np.testing.assert_allclose(
        ops.convert_to_numpy(attn_ops.softmax(scores)), ref.softmax(scores), rtol=1e-5
    )


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fully_masked_row_is_zero_not_nan(dtype):
    scores = np.full((2, 4), 60000.0 if dtype == "float16" else 1e30, "float32").astype(dtype)
    mask = np.array([[False] * 4, [True, False, True, False]])
    out = ops.convert_to_numpy(attn_ops.softmax(scores, mask=mask)).astype("float32")
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[0], 0.0)
    np.testing.assert_allclose(out[1], [0.5, 0.0, 0.5, 0.0], rtol=1e-3)


def test_softmax_keeps_dtype_and_normalises_in_float32():
    scores = np.array([[10.0, 11.0, 12.0]], "float16")
    out = attn_ops.softmax(scores)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    np.testing.assert_allclose(
        ops.convert_to_numpy(out).astype("float32"),
        ref.softmax(scores.astype("float32")),
        rtol=2e-3,
    )


# --- sigmoid, sparsemax, entmax15, entmax_bisect, hardmax -------------------------------------

SCORES = RNG.normal(scale=1.5, size=(3, 4, 7)).astype("float32")
MASK = RNG.random((3, 4, 7)) > 0.3
MASK[:, :, 0] = True
MASK[2, 3] = [True, False, False, True, False, False, False]


def entmax_bisect_15(scores, mask=None, axis=-1):
    return attn_ops.entmax_bisect(scores, 1.5, mask=mask, axis=axis)


ALL_FUNCTIONS = [
    attn_ops.sigmoid,
    attn_ops.sparsemax,
    attn_ops.entmax15,
    entmax_bisect_15,
    attn_ops.hardmax,
]


def test_sigmoid_matches_numpy_and_is_zero_on_mask():
    out = ops.convert_to_numpy(attn_ops.sigmoid(SCORES, mask=MASK))
    np.testing.assert_allclose(out, np.where(MASK, ref.sigmoid(SCORES), 0.0), rtol=1e-6)
    assert np.all(out[~MASK] == 0.0)


def test_sparsemax_matches_sort_based_numpy_reference():
    out = ops.convert_to_numpy(attn_ops.sparsemax(SCORES, mask=MASK))
    np.testing.assert_allclose(out, sparse_ref.sparsemax(SCORES, MASK), atol=1e-6)
    assert np.all(out[~MASK] == 0.0)
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-6)
    assert np.any((out == 0.0) & MASK), "sparsemax should put exact zeros on some real positions"


def test_sparsemax_threshold_satisfies_its_defining_equation():
    out = ops.convert_to_numpy(attn_ops.sparsemax(SCORES, mask=MASK)).astype("float64")
    z = SCORES.astype("float64")
    for index in np.ndindex(SCORES.shape[:-1]):
        p, s, m = out[index], z[index], MASK[index]
        support = p > 0
        tau = s[support] - p[support]  # p_i = s_i - tau on the support
        np.testing.assert_allclose(tau, tau[0], atol=1e-6)
        assert np.all(s[m & ~support] <= tau[0] + 1e-6)  # off the support s_i <= tau
        np.testing.assert_allclose(np.maximum(s[m] - tau[0], 0).sum(), 1.0, rtol=1e-6)
        np.testing.assert_allclose(tau[0], sparse_ref.sparsemax_threshold(s[m]), atol=1e-6)


def test_sparsemax_is_the_euclidean_projection_onto_the_simplex():
    scores = RNG.normal(scale=2.0, size=(20, 9)).astype("float32")
    out = ops.convert_to_numpy(attn_ops.sparsemax(scores))
    for p, z in zip(out, scores.astype("float64"), strict=True):
        np.testing.assert_allclose(p, sparse_ref.simplex_projection(z), atol=1e-6)
        others = RNG.dirichlet(np.ones(z.size), size=50)  # random points of the simplex
        assert np.all(((others - z) ** 2).sum(-1) >= ((p - z) ** 2).sum() - 1e-6)


def test_sparsemax_along_another_axis():
    out = ops.convert_to_numpy(attn_ops.sparsemax(SCORES, mask=MASK, axis=1))
    expected = np.moveaxis(
        sparse_ref.sparsemax(np.moveaxis(SCORES, 1, -1), np.moveaxis(MASK, 1, -1)), -1, 1
    )
    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_entmax15_matches_numpy_reference_and_defining_equation():
    out = ops.convert_to_numpy(attn_ops.entmax15(SCORES, mask=MASK))
    np.testing.assert_allclose(out, sparse_ref.entmax(SCORES, 1.5, MASK), atol=2e-6)
    assert np.all(out[~MASK] == 0.0)
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-5)
    assert np.any((out == 0.0) & MASK)
    # p_i = (s_i/2 - tau)^2 on the support: one tau per row, and s_j/2 <= tau off the support.
    for index in np.ndindex(SCORES.shape[:-1]):
        p, s, m = out[index], SCORES[index].astype("float64"), MASK[index]
        support = p > 0
        tau = s[support] / 2 - np.sqrt(p[support])
        np.testing.assert_allclose(tau, tau[0], atol=1e-5)
        assert np.all(s[m & ~support] / 2 <= tau[0] + 1e-5)


def test_entmax15_equals_entmax_bisect_at_alpha_one_and_a_half():
    np.testing.assert_allclose(
        ops.convert_to_numpy(attn_ops.entmax15(SCORES, mask=MASK)),
        ops.convert_to_numpy(attn_ops.entmax_bisect(SCORES, 1.5, mask=MASK)),
        atol=2e-6,
    )


# For alpha > 2, p = u ** (1 / (alpha - 1)) has an unbounded slope at u = 0: float32 rounding of
# tau (~6e-8) moves a small weight by ~0.5 / sqrt(u) times that at alpha = 3, hence 1e-5 there.
@pytest.mark.parametrize("alpha, atol", [(1.25, 2e-6), (1.5, 2e-6), (2.0, 2e-6), (3.0, 1e-5)])
def test_entmax_bisect_matches_numpy_reference(alpha, atol):
    out = ops.convert_to_numpy(attn_ops.entmax_bisect(SCORES, alpha, mask=MASK))
    np.testing.assert_allclose(out, sparse_ref.entmax(SCORES, alpha, MASK), atol=atol)
    assert np.all(out[~MASK] == 0.0)
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-6)


def test_entmax_bisect_limits_sparsemax_and_softmax():
    np.testing.assert_allclose(
        ops.convert_to_numpy(attn_ops.entmax_bisect(SCORES, 2.0, mask=MASK)),
        ops.convert_to_numpy(attn_ops.sparsemax(SCORES, mask=MASK)),
        atol=2e-6,
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(attn_ops.entmax_bisect(SCORES, 1.001, mask=MASK)),
        ref.softmax(SCORES, MASK),
        atol=2e-3,
    )


def test_entmax_bisect_with_one_alpha_per_row():
    alpha = np.array([1.2, 1.5, 2.5], "float32").reshape(3, 1, 1)
    out = ops.convert_to_numpy(attn_ops.entmax_bisect(SCORES, alpha, mask=MASK))
    for b in range(3):
        expected = sparse_ref.entmax(SCORES[b], float(alpha[b, 0, 0]), MASK[b])
        np.testing.assert_allclose(out[b], expected, atol=2e-6)


def test_hardmax_one_hot_first_of_ties_among_unmasked():
    scores = np.array([[3.0, 1.0, 3.0, 9.0], [2.0, 5.0, 5.0, 5.0]], "float32")
    mask = np.array([[True, True, True, False], [True, True, True, True]])
    out = ops.convert_to_numpy(attn_ops.hardmax(scores, mask=mask))
    np.testing.assert_array_equal(out, [[1, 0, 0, 0], [0, 1, 0, 0]])
    out = ops.convert_to_numpy(attn_ops.hardmax(SCORES, mask=MASK))
    expected = np.eye(7)[np.argmax(np.where(MASK, SCORES, -np.inf), axis=-1)]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.tensorflow_only
def test_hardmax_gradient_is_zero_not_none():
    scores = tf.constant(SCORES)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        loss = tf.reduce_sum(attn_ops.hardmax(scores, mask=MASK) * SCORES)
    grad = tape.gradient(loss, scores)
    assert grad is not None
    np.testing.assert_array_equal(ops.convert_to_numpy(grad), 0.0)


def _vjp_and_finite_difference(fn, numpy_fn, scores, cotangent, eps=1e-6):
    """The backend's gradient of sum(fn(s) * c) (`tf.GradientTape`, `jax.grad`,
    `torch.autograd`) and its float64 central difference on the NumPy reference."""
    if keras.backend.backend() == "jax":
        import jax

        grad = np.asarray(jax.grad(lambda s: ops.sum(fn(s) * cotangent))(scores))
    elif keras.backend.backend() == "torch":
        import torch

        s = ops.convert_to_tensor(scores).requires_grad_(True)
        (grad,) = torch.autograd.grad(ops.sum(fn(s) * ops.convert_to_tensor(cotangent)), [s])
        grad = ops.convert_to_numpy(grad)
    else:
        s = tf.constant(scores)
        with tf.GradientTape() as tape:
            tape.watch(s)
            loss = tf.reduce_sum(fn(s) * cotangent)
        grad = ops.convert_to_numpy(tape.gradient(loss, s))
    numeric = np.zeros(scores.shape, "float64")
    base = scores.astype("float64")
    for index in np.ndindex(scores.shape):
        up, down = base.copy(), base.copy()
        up[index] += eps
        down[index] -= eps
        numeric[index] = ((numpy_fn(up) - numpy_fn(down)) * cotangent).sum() / (2 * eps)
    return grad, numeric


GRADIENT_CASES = {
    "sigmoid": (attn_ops.sigmoid, lambda s: np.where(MASK[0], ref.sigmoid(s), 0.0)),
    "sparsemax": (attn_ops.sparsemax, lambda s: sparse_ref.sparsemax(s, MASK[0])),
    "entmax15": (attn_ops.entmax15, lambda s: sparse_ref.entmax(s, 1.5, MASK[0])),
    "entmax_bisect_1.3": (
        lambda s, mask: attn_ops.entmax_bisect(s, 1.3, mask=mask),
        lambda s: sparse_ref.entmax(s, 1.3, MASK[0]),
    ),
    "entmax_bisect_2.5": (
        lambda s, mask: attn_ops.entmax_bisect(s, 2.5, mask=mask),
        lambda s: sparse_ref.entmax(s, 2.5, MASK[0]),
    ),
}


@pytest.mark.parametrize("name", sorted(GRADIENT_CASES))
def test_gradient_matches_central_finite_differences(name):
    fn, numpy_fn = GRADIENT_CASES[name]
    scores, mask = SCORES[0], MASK[0]
    cotangent = RNG.normal(size=scores.shape)
    grad, numeric = _vjp_and_finite_difference(
        lambda s: fn(s, mask=mask), numpy_fn, scores, cotangent.astype("float32")
    )
    assert np.abs(numeric).max() > 1e-2, "the check needs a non-trivial gradient"
    np.testing.assert_allclose(grad, numeric, atol=2e-5, rtol=1e-4)
    assert np.all(grad[~mask] == 0.0)


@pytest.mark.tensorflow_only
def test_entmax_bisect_gradient_with_respect_to_alpha():
    scores, mask = SCORES[0], MASK[0]
    cotangent = RNG.normal(size=scores.shape)
    alpha = tf.Variable(1.4)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(attn_ops.entmax_bisect(scores, alpha, mask=mask) * cotangent)
    grad = float(tape.gradient(loss, alpha))
    eps = 1e-6
    numeric = (
        (sparse_ref.entmax(scores, 1.4 + eps, mask) - sparse_ref.entmax(scores, 1.4 - eps, mask))
        * cotangent
    ).sum() / (2 * eps)
    assert abs(numeric) > 1e-2
    np.testing.assert_allclose(grad, numeric, rtol=1e-3)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("fn", ALL_FUNCTIONS, ids=lambda f: f.__name__)
def test_fully_masked_row_gives_zeros_and_finite_gradients(fn, dtype):
    scores = tf.constant(np.where(MASK, SCORES, 6e4).astype(dtype))
    mask = MASK.copy()
    mask[1, 2] = False
    with tf.GradientTape() as tape:
        tape.watch(scores)
        out = fn(scores, mask=mask)
        loss = tf.reduce_sum(tf.cast(out, "float32") * RNG.normal(size=SCORES.shape))
    grad = tape.gradient(loss, scores)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    out = np.asarray(out, "float32")
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(np.asarray(grad, "float32")))
    np.testing.assert_array_equal(out[1, 2], 0.0)
    assert np.all(out[~mask] == 0.0)


@pytest.mark.parametrize(
    "fn", [attn_ops.sparsemax, attn_ops.entmax15, entmax_bisect_15], ids=lambda f: f.__name__
)
def test_float16_inputs_normalise_in_float32(fn):
    out = fn(SCORES.astype("float16"), mask=MASK)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    expected = ops.convert_to_numpy(fn(SCORES.astype("float16").astype("float32"), mask=MASK))
    np.testing.assert_allclose(ops.convert_to_numpy(out).astype("float32"), expected, atol=1e-3)


def test_entmax_bisect_bad_arguments():
    with pytest.raises(ValueError, match="alpha=1.0"):
        attn_ops.entmax_bisect(SCORES, 1.0)
    with pytest.raises(ValueError, match="n_iter=0"):
        attn_ops.entmax_bisect(SCORES, 1.5, n_iter=0)
    with pytest.raises(ValueError, match=r"alpha.shape=\(3,\)"):
        attn_ops.entmax_bisect(SCORES, np.array([1.5, 1.5, 1.5], "float32"))


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("fn", ALL_FUNCTIONS, ids=lambda f: f.__name__)
def test_xla_compiled_values_and_gradients_match_eager(fn):
    mask = MASK.copy()
    mask[1, 2] = False
    cotangent = RNG.normal(size=SCORES.shape).astype("float32")

    def value_and_grad(scores):
        with tf.GradientTape() as tape:
            tape.watch(scores)
            loss = tf.reduce_sum(fn(scores, mask=mask) * cotangent)
        return fn(scores, mask=mask), tape.gradient(loss, scores)

    compiled = tf.function(value_and_grad, jit_compile=True)(tf.constant(SCORES))
    eager = value_and_grad(tf.constant(SCORES))
    for got, want in zip(compiled, eager, strict=True):
        np.testing.assert_allclose(ops.convert_to_numpy(got), ops.convert_to_numpy(want), atol=1e-6)
