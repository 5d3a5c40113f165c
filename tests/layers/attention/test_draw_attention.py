import numpy as np
import pytest
from keras import ops

from keras_attn.layers import DrawRead, DrawWrite
from keras_attn.testing import run_layer_test

RNG = np.random.default_rng(2)
H, W, N, D = 12, 10, 4, 6
IMAGES = RNG.uniform(size=(3, H, W, 2)).astype("float32")
STATE = RNG.normal(size=(3, D)).astype("float32")


def numpy_window(kernel, bias, state, height, width, n):
    """Gregor et al. (2015), eq. 21-24, pixels counted from 0."""
    gx, gy, log_var, log_delta, log_gamma = (state @ kernel + bias).T
    return {
        "center_x": (width + 1) / 2 * (gx + 1) - 1,
        "center_y": (height + 1) / 2 * (gy + 1) - 1,
        "stride": (max(height, width) - 1) / (n - 1) * np.exp(log_delta),
        "variance": np.exp(log_var),
        "intensity": np.exp(log_gamma),
    }


def numpy_filterbank(center, stride, variance, n, length):
    """F[b, i, a] = exp(-(a - mu_i)^2 / (2 sigma^2)) / Z, mu_i = g + (i - N/2 - 0.5) delta."""
    i = np.arange(1, n + 1)
    mu = center[:, None] + (i - n / 2 - 0.5)[None] * stride[:, None]
    f = np.exp(
        -((np.arange(length)[None, None] - mu[:, :, None]) ** 2) / (2 * variance[:, None, None])
    )
    return f / f.sum(-1, keepdims=True)


def randomised(layer, *inputs):
    layer(*inputs)
    layer.set_weights([RNG.normal(scale=0.3, size=w.shape) for w in layer.get_weights()])
    return [ops.convert_to_numpy(w) for w in layer.window.weights]


def test_read_matches_numpy():
    read = DrawRead(N)
    kernel, bias = randomised(read, IMAGES, STATE)
    window = numpy_window(kernel, bias, STATE, H, W, N)
    f_x = numpy_filterbank(window["center_x"], window["stride"], window["variance"], N, W)
    f_y = numpy_filterbank(window["center_y"], window["stride"], window["variance"], N, H)
    expected = np.einsum("bih,bhwc,bjw->bijc", f_y, IMAGES, f_x)
    expected *= window["intensity"][:, None, None, None]
    np.testing.assert_allclose(
        ops.convert_to_numpy(read(IMAGES, STATE)), expected, rtol=1e-4, atol=1e-6
    )
    got = {k: ops.convert_to_numpy(v) for k, v in read.window_parameters(STATE, H, W).items()}
    for name, value in window.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, err_msg=name)


def test_write_matches_numpy_and_is_the_adjoint_of_read():
    """With the same window, write is read transposed: <read(x), w> = <x, write(w)> gamma^2."""
    write, read = DrawWrite(N, H, W), DrawRead(N)
    patch = RNG.normal(size=(3, N, N, 2)).astype("float32")
    kernel, bias = randomised(write, patch, STATE)
    read(IMAGES, STATE)
    read.set_weights(write.get_weights())
    window = numpy_window(kernel, bias, STATE, H, W, N)
    f_x = numpy_filterbank(window["center_x"], window["stride"], window["variance"], N, W)
    f_y = numpy_filterbank(window["center_y"], window["stride"], window["variance"], N, H)
    expected = np.einsum("bih,bijc,bjw->bhwc", f_y, patch, f_x)
    expected /= window["intensity"][:, None, None, None]
    written = ops.convert_to_numpy(write(patch, STATE))
    np.testing.assert_allclose(written, expected, rtol=1e-4, atol=1e-6)
    gamma2 = window["intensity"] ** 2
    left = (ops.convert_to_numpy(read(IMAGES, STATE)) * patch).sum((1, 2, 3))
    right = (IMAGES * written).sum((1, 2, 3)) * gamma2
    np.testing.assert_allclose(left, right, rtol=1e-4)


def test_a_sharp_unit_stride_window_reads_the_pixels_it_covers():
    """Stride 1 and a tiny variance at centre (5.5, 3.5): the glimpse is the crop
    x[2:6, 4:8] (rows around centre_y, columns around centre_x)."""
    read = DrawRead(N)
    read(IMAGES, STATE)
    g_x, g_y = (5.5 + 1) * 2 / (W + 1) - 1, (3.5 + 1) * 2 / (H + 1) - 1
    log_delta = np.log((N - 1) / (max(H, W) - 1))
    bias = np.array([g_x, g_y, np.log(1e-4), log_delta, 0.0], "float32")
    read.window.set_weights([np.zeros((D, 5), "float32"), bias])
    np.testing.assert_allclose(
        ops.convert_to_numpy(read(IMAGES, STATE)), IMAGES[:, 2:6, 4:8], atol=1e-5
    )


def test_a_window_far_outside_the_image_reads_finite_values():
    read = DrawRead(N)
    read(IMAGES, STATE)
    bias = np.array([40.0, -40.0, np.log(1e-3), 0.0, 0.0], "float32")
    read.window.set_weights([np.zeros((D, 5), "float32"), bias])
    assert np.all(np.isfinite(ops.convert_to_numpy(read(IMAGES, STATE))))


def test_bad_arguments():
    with pytest.raises(ValueError, match="grid_size=0"):
        DrawRead(0)
    with pytest.raises(ValueError, match="height=-2"):
        DrawWrite(3, height=-2, width=4)


def test_harness_read():
    run_layer_test(
        DrawRead,
        {"grid_size": 3},
        {"images": IMAGES, "state": STATE},
        weights_kwarg=None,
        expected_output_shape=(3, 3, 3, 2),
        mixed_precision_tolerances={"mixed_float16": 1e-2, "mixed_bfloat16": 5e-2},
    )


@pytest.mark.every_backend
def test_harness_write():
    run_layer_test(
        DrawWrite,
        {"grid_size": 3, "height": H, "width": W},
        {"patch": RNG.normal(size=(3, 3, 3, 2)).astype("float32"), "state": STATE},
        weights_kwarg=None,
        expected_output_shape=(3, H, W, 2),
        mixed_precision_tolerances={"mixed_float16": 1e-2, "mixed_bfloat16": 5e-2},
    )
