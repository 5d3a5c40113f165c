import numpy as np
import pytest
from keras import ops

from keras_attn.distributions.sigmoid import Sigmoid
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(3)
SCORES = RNG.normal(size=(2, 3, 5)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])
ATTENTION_MASK = np.broadcast_to(MASK[:, None, :], SCORES.shape)


def test_matches_numpy_reference_with_mask():
    out = ops.convert_to_numpy(Sigmoid()(SCORES, attention_mask=ATTENTION_MASK))
    np.testing.assert_allclose(out, np.where(ATTENTION_MASK, ref.sigmoid(SCORES), 0.0), atol=2e-6)
    assert np.all(out[~ATTENTION_MASK] == 0.0)


def test_fully_masked_row_gives_zeros_not_nan():
    mask = ATTENTION_MASK.copy()
    mask[1, 0] = False
    for dtype in ("float32", "mixed_float16"):
        out = Sigmoid(dtype=dtype)(SCORES * 1e3, attention_mask=mask)
        out = ops.convert_to_numpy(out).astype("float32")
        assert np.all(np.isfinite(out))
        np.testing.assert_array_equal(out[1, 0], 0.0)


def test_harness():
    run_layer_test(
        Sigmoid,
        {},
        {"scores": SCORES[:, 0]},
        mask=MASK,
        padded_input="scores",
        mask_kwarg="attention_mask",
        weights_kwarg=None,
        expected_output_shape=(2, 5),
        run_saved_model_check=True,
    )


def test_takes_no_arguments():
    with pytest.raises(ValueError, match="alpha"):
        Sigmoid(alpha=2.0)
