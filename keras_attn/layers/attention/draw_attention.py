"""DRAW's selective attention (Gregor et al., 2015, section 3.2): an N x N grid of Gaussian
filters that reads a glimpse of an image, or writes a patch onto a canvas, where a recurrent
state puts it."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import check_positive_int

# The window parameters, in the order of the linear map's outputs.
PARAMETERS = ("center_x", "center_y", "log_variance", "log_stride", "log_intensity")


def gaussian_filterbank(center, stride, variance, grid_size: int, length: int):
    """One axis' filterbank `F` `(batch, N, length)`, each row a normalised Gaussian.

        mu_i   = center + (i - N / 2 - 0.5) * stride        i = 1 .. N
        F[i, a] = exp(-(a - mu_i)^2 / (2 variance)) / Z_i,  Z_i = sum_a exp(...)

    Args:
        center, stride, variance: `(batch,)`, in pixels (pixel `a` is at coordinate `a`).
        grid_size: `N`.
        length: the image's size along the axis.
    """
    offsets = ops.cast(ops.arange(1, grid_size + 1), center.dtype) - grid_size / 2 - 0.5
    means = center[:, None] + offsets[None, :] * stride[:, None]  # (batch, N)
    pixels = ops.cast(ops.arange(length), center.dtype)  # (length,)
    exponent = -ops.square(pixels[None, None, :] - means[:, :, None]) / (
        2.0 * variance[:, None, None]
    )  # (batch, N, length)
    # Normalised in log space: a far-off window must not divide 0 by 0.
    return ops.softmax(exponent, axis=-1)


class _DrawAttention(keras.layers.Layer):
    """The linear map from a state to the window (shared by `DrawRead` and `DrawWrite`)."""

    def __init__(self, grid_size: int, **kwargs):
        super().__init__(**kwargs)
        self.grid_size = check_positive_int("grid_size", grid_size)

    def _build_window(self, state_shape):
        self.window = keras.layers.Dense(len(PARAMETERS), name="window")
        self.window.build(state_shape)

    def window_parameters(self, state, height: int, width: int) -> dict:
        """The window a state puts on a `height x width` image (Gregor et al., eq. 22-24):

            (g~_X, g~_Y, log sigma^2, log delta~, log gamma) = W state + b
            g_X = (A + 1) / 2 (g~_X + 1),  g_Y = (B + 1) / 2 (g~_Y + 1)
            delta = (max(A, B) - 1) / (N - 1) delta~

        with `A = width`, `B = height`. The grid's centre is `(g_X, g_Y)` in pixel coordinates
        (`(center_x, center_y)`), `stride` is `delta`, `variance` `sigma^2`, `intensity` `gamma`;
        each `(batch,)`, in float32.
        """
        raw = ops.cast(self.window(state), "float32")
        center_x, center_y, log_variance, log_stride, log_intensity = (
            raw[:, i] for i in range(len(PARAMETERS))
        )
        spread = (max(height, width) - 1) / max(self.grid_size - 1, 1)
        return {
            # The paper's (A + 1) / 2 (g + 1) counts pixels from 1; ours count from 0.
            "center_x": (width + 1) / 2 * (center_x + 1) - 1,
            "center_y": (height + 1) / 2 * (center_y + 1) - 1,
            "stride": spread * ops.exp(log_stride),
            "variance": ops.exp(log_variance),
            "intensity": ops.exp(log_intensity),
        }

    def filterbanks(self, state, height: int, width: int):
        """`(F_X (batch, N, width), F_Y (batch, N, height), window parameters)`."""
        window = self.window_parameters(state, height, width)
        f_x = gaussian_filterbank(
            window["center_x"], window["stride"], window["variance"], self.grid_size, width
        )
        f_y = gaussian_filterbank(
            window["center_y"], window["stride"], window["variance"], self.grid_size, height
        )
        return f_x, f_y, window

    def get_config(self):
        config = super().get_config()
        config.update(grid_size=self.grid_size)
        return config


@keras_attn_export("keras_attn.layers.DrawRead")
class DrawRead(_DrawAttention):
    """DRAW's read: an `N x N` glimpse of each image channel through Gaussian filters.

        glimpse_c = gamma * F_Y x_c F_X^T                        (batch, N, N, channels)

    with the filterbanks and `gamma` from the state (`window_parameters`). DRAW reads the image
    and the error image `x - sigmoid(canvas)` this way and concatenates the glimpses.

    Args:
        grid_size: `N`.

    Call arguments:
        images: `(batch, height, width, channels)`.
        state: `(batch, d)`, the decoder's previous state in DRAW.

    Returns:
        The glimpse `(batch, N, N, channels)`.

    Example:

    >>> import numpy as np
    >>> read = DrawRead(5)
    >>> tuple(read(np.ones((2, 28, 28, 1), "float32"), np.zeros((2, 16), "float32")).shape)
    (2, 5, 5, 1)

    References:
        Gregor et al., 2015, "DRAW: A Recurrent Neural Network For Image Generation",
        arXiv:1502.04623.
    """

    def build(self, images_shape, state_shape):
        self._build_window(state_shape)
        self.built = True

    def call(self, images, state):
        height, width = images.shape[1], images.shape[2]
        f_x, f_y, window = self.filterbanks(state, height, width)
        images = ops.cast(images, "float32")
        # F_Y x F_X^T per channel: (b, N, H) x (b, H, W, C) x (b, N, W) -> (b, N, N, C)
        glimpse = ops.einsum("bih,bhwc,bjw->bijc", f_y, images, f_x)
        glimpse = glimpse * window["intensity"][:, None, None, None]
        return ops.cast(glimpse, self.compute_dtype)

    def compute_output_shape(self, images_shape, state_shape):
        return (images_shape[0], self.grid_size, self.grid_size, images_shape[3])


@keras_attn_export("keras_attn.layers.DrawWrite")
class DrawWrite(_DrawAttention):
    """DRAW's write: an `N x N` patch spread onto a `height x width` canvas.

        write_c = (1 / gamma) F_Y^T w_c F_X                      (batch, height, width, channels)

    where the patch `w` `(batch, N, N, channels)` and the window (`window_parameters`) both come
    from the decoder state; DRAW adds the result to its canvas.

    Args:
        grid_size: `N`.
        height, width: the canvas' size.

    Call arguments:
        patch: `(batch, N, N, channels)`.
        state: `(batch, d)`.

    Returns:
        `(batch, height, width, channels)`.

    Example:

    >>> import numpy as np
    >>> write = DrawWrite(5, height=28, width=28)
    >>> tuple(write(np.ones((2, 5, 5, 1), "float32"), np.zeros((2, 16), "float32")).shape)
    (2, 28, 28, 1)

    References:
        Gregor et al., 2015, "DRAW: A Recurrent Neural Network For Image Generation",
        arXiv:1502.04623.
    """

    def __init__(self, grid_size: int, height: int, width: int, **kwargs):
        super().__init__(grid_size, **kwargs)
        self.height = check_positive_int("height", height)
        self.width = check_positive_int("width", width)

    def build(self, patch_shape, state_shape):
        self._build_window(state_shape)
        self.built = True

    def call(self, patch, state):
        f_x, f_y, window = self.filterbanks(state, self.height, self.width)
        patch = ops.cast(patch, "float32")
        # F_Y^T w F_X per channel: (b, N, H) x (b, N, N, C) x (b, N, W) -> (b, H, W, C)
        canvas = ops.einsum("bih,bijc,bjw->bhwc", f_y, patch, f_x)
        canvas = canvas / window["intensity"][:, None, None, None]
        return ops.cast(canvas, self.compute_dtype)

    def compute_output_shape(self, patch_shape, state_shape):
        return (patch_shape[0], self.height, self.width, patch_shape[3])

    def get_config(self):
        config = super().get_config()
        config.update(height=self.height, width=self.width)
        return config
