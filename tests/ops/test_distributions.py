import keras
import numpy as np
import pytest

from keras_attn import ops as attn_ops
from tests import numpy_reference as ref

RNG = np.random.default_rng(1)


def test_softmax_matches_numpy_with_mask():
    scores = RNG.normal(size=(3, 4, 6)).astype("float32")
    mask = RNG.random((3, 4, 6)) > 0.3
    mask[:, :, 0] = True
    out = attn_ops.softmax(scores, mask=mask).numpy()
    np.testing.assert_allclose(out, ref.softmax(scores, mask), rtol=1e-5, atol=1e-7)
    assert np.all(out[~mask] == 0.0)
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-6)


def test_softmax_without_mask():
    scores = RNG.normal(size=(2, 5)).astype("float32")
    np.testing.assert_allclose(attn_ops.softmax(scores).numpy(), ref.softmax(scores), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fully_masked_row_is_zero_not_nan(dtype):
    scores = np.full((2, 4), 60000.0 if dtype == "float16" else 1e30, "float32").astype(dtype)
    mask = np.array([[False] * 4, [True, False, True, False]])
    out = np.asarray(attn_ops.softmax(scores, mask=mask)).astype("float32")
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[0], 0.0)
    np.testing.assert_allclose(out[1], [0.5, 0.0, 0.5, 0.0], rtol=1e-3)


def test_softmax_keeps_dtype_and_normalises_in_float32():
    scores = np.array([[10.0, 11.0, 12.0]], "float16")
    out = attn_ops.softmax(scores)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    np.testing.assert_allclose(
        np.asarray(out, "float32"), ref.softmax(scores.astype("float32")), rtol=2e-3
    )
