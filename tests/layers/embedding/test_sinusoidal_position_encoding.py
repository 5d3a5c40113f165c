import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import SinusoidalPositionEncoding
from keras_attn.testing import run_layer_test
from tests.lazy_tf import tf


def reference(length, dim, start=0, base=10000.0):
    """Vaswani et al. (2017, section 3.5) in float64.

    PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)).
    """
    table = np.zeros((length, dim))
    for pos in range(start, start + length):
        for i in range((dim + 1) // 2):
            angle = pos / base ** (2 * i / dim)
            table[pos - start, 2 * i] = np.sin(angle)
            if 2 * i + 1 < dim:
                table[pos - start, 2 * i + 1] = np.cos(angle)
    return table


@pytest.mark.parametrize("dim", [16, 7])
def test_matches_equation_2_27(dim):
    encoding = ops.convert_to_numpy(SinusoidalPositionEncoding()(np.zeros((2, 40, dim), "float32")))
    np.testing.assert_allclose(encoding[0], reference(40, dim), rtol=0, atol=1e-5)
    np.testing.assert_array_equal(encoding[1], encoding[0])


def test_other_wavelength_and_far_positions():
    layer = SinusoidalPositionEncoding(max_wavelength=100)
    encoding = ops.convert_to_numpy(layer(np.zeros((1, 3, 6), "float32"), start_index=1997))
    # float32 angles near 2000 rad carry ~1e-4 absolute error; that is what float32 can hold.
    np.testing.assert_allclose(encoding[0], reference(3, 6, 1997, 100.0), rtol=0, atol=5e-4)


@pytest.mark.tensorflow_only
def test_one_step_at_start_index_equals_row_of_full_pass():
    layer = SinusoidalPositionEncoding()
    full = ops.convert_to_numpy(layer(np.zeros((1, 12, 10), "float32")))
    for k in (0, 5, 11):
        step = ops.convert_to_numpy(layer(np.zeros((1, 1, 10), "float32"), start_index=k))
        np.testing.assert_array_equal(step[0, 0], full[0, k])

    @tf.function
    def step_fn(index):
        return layer(tf.zeros((1, 1, 10)), start_index=index)

    np.testing.assert_array_equal(ops.convert_to_numpy(step_fn(tf.constant(7)))[0, 0], full[0, 7])


def test_float16_far_positions_stay_accurate():
    layer = SinusoidalPositionEncoding(dtype="mixed_float16")
    encoding = layer(np.zeros((1, 4, 8), "float32"), start_index=2046)
    assert keras.backend.standardize_dtype(encoding.dtype) == "float16"
    # float16 cannot represent 2049; computing positions in float32 keeps the row right.
    np.testing.assert_allclose(
        ops.convert_to_numpy(encoding).astype("float64")[0],
        reference(4, 8, 2046),
        rtol=0,
        atol=2e-3,
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_wavelength=1"):
        SinusoidalPositionEncoding(max_wavelength=1)
    with pytest.raises(ValueError, match="max_wavelength='big'"):
        SinusoidalPositionEncoding(max_wavelength="big")


@pytest.mark.every_backend
def test_harness():
    run_layer_test(
        SinusoidalPositionEncoding,
        {"max_wavelength": 500},
        {"inputs": np.random.default_rng(0).normal(size=(2, 5, 6))},
        mask=np.array([[True] * 5, [True, True, False, False, False]]),
        padded_input="inputs",
        weights_kwarg=None,
        expected_output_shape=(2, 5, 6),
    )
