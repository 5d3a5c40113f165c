"""Sub-sampling of a sequence over windows of neighbouring steps: max, (weighted) average or L2."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import check_choice, check_positive_int

MODES = ("max", "average", "weighted", "l2")
PADDINGS = ("valid", "same")


@keras_attn_export("keras_attn.layers.NeighbourhoodPooling1D")
class NeighbourhoodPooling1D(keras.layers.Layer):
    """Pooling over windows of `pool_size` neighbouring steps, the pooling variants of CNNs.

    Window `j` holds the steps `t = j s - l .. j s - l + p - 1` (`p = pool_size`, `s = strides`,
    `l` the left padding) that exist and are real (mask True); for each feature:

        "max":      y_j = max_{t in W_j} x_t
        "average":  y_j = (1 / |W_j|) sum_{t in W_j} x_t
        "weighted": y_j = sum_{t in W_j} a_{t - j s + l} x_t / sum_{t in W_j} a_{t - j s + l},
                    a = softmax(w), w (pool_size,) learned, zeros at first (the plain average)
        "l2":       y_j = sqrt(sum_{t in W_j} x_t^2)           (the L2 norm of the neighbourhood)

    Max pooling keeps each feature's strongest response in the window, so a feature that moves
    within a window leaves the output unchanged (translation invariance), and every variant
    divides the length by `strides` (less computation above it). `padding="valid"` keeps only
    full windows (`floor((T - p) / s) + 1` of them); `"same"` gives `ceil(T / s)` windows,
    padding as Keras' pooling layers do (`l = floor(max((n - 1) s + p - T, 0) / 2)`), the padded
    steps left out like masked ones. A window with no real step gives zeros, and the output
    mask is False there. "max" and "average" without a mask equal `keras.layers.MaxPooling1D`
    and `AveragePooling1D`.

    Args:
        pool_size: `p`, the window's length.
        strides: `s`, steps between window starts (default: `pool_size`).
        mode: "max", "average", "weighted" or "l2".
        padding: "valid" or "same".

    Call arguments:
        inputs: `(batch, T, d)`.
        mask: bool `(batch, T)`, True at real steps; filled from Keras masking.

    Returns:
        `(batch, n, d)`; the output mask, when a mask is given, says which windows hold a real
        step.

    Example:

    >>> import numpy as np
    >>> x = np.array([[[1.0], [-3.0], [2.0], [2.0]]], "float32")
    >>> [NeighbourhoodPooling1D(2, mode=m)(x)[0, :, 0].numpy().tolist() for m in ("max", "l2")]
    [[1.0, 2.0], [3.1622776985168457, 2.8284270763397217]]

    References:
        LeCun et al., 1998, "Gradient-based learning applied to document recognition" (LeNet-5's
        sub-sampling); Boureau, Ponce and LeCun, 2010, "A theoretical analysis of feature
        pooling in visual recognition"; Sermanet, Chintala and LeCun, 2012, "Convolutional
        neural networks applied to house numbers digit classification" (L2 pooling).
    """

    def __init__(
        self,
        pool_size: int,
        strides: int | None = None,
        mode: str = "max",
        padding: str = "valid",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.pool_size = check_positive_int("pool_size", pool_size)
        self.strides = self.pool_size if strides is None else check_positive_int("strides", strides)
        self.mode = check_choice("mode", mode, MODES)
        self.padding = check_choice("padding", padding, PADDINGS)
        self.supports_masking = True

    def build(self, input_shape):
        if self.mode == "weighted":
            # a = softmax(w): zeros start as the plain average of the window.
            self.window_logits = self.add_weight(
                shape=(self.pool_size,), initializer="zeros", name="window_logits"
            )
        self.built = True

    def _windows(self, length):
        """`(indices (n, p) int32 into the padded sequence, left padding, n)` for `length` T."""
        p, s = self.pool_size, self.strides
        if self.padding == "valid":
            count = ops.maximum((length - p) // s + 1, 0)
            left = 0
        else:
            count = (length + s - 1) // s
            left = ops.maximum((count - 1) * s + p - length, 0) // 2
        starts = ops.arange(count, dtype="int32") * s - left  # (n,)
        return starts[:, None] + ops.arange(p, dtype="int32")[None, :], count

    def call(self, inputs, mask=None):
        length = ops.shape(inputs)[1]
        positions, _ = self._windows(length)  # (n, p), may point outside 0 .. T-1
        inside = (positions >= 0) & (positions < length)  # (n, p)
        clipped = ops.clip(positions, 0, length - 1)
        windows = ops.take(inputs, clipped, axis=1)  # (batch, n, p, d)
        real = ops.broadcast_to(inside[None], ops.shape(windows)[:3])  # (batch, n, p)
        if mask is not None:
            real = real & ops.take(ops.cast(mask, "bool"), clipped, axis=1)
        any_real = ops.any(real, axis=2)  # (batch, n)
        real = real[..., None]  # (batch, n, p, 1)
        zeros = ops.zeros_like(windows)
        if self.mode == "max":
            lowest = ops.full_like(windows, float("-inf"))
            pooled = ops.max(ops.where(real, windows, lowest), axis=2)
        elif self.mode == "l2":
            squares = ops.sum(ops.where(real, ops.square(windows), zeros), axis=2)
            positive = squares > 0  # sqrt has no gradient at 0: take it only above
            pooled = ops.where(positive, ops.sqrt(ops.where(positive, squares, 1.0)), 0.0)
        else:
            if self.mode == "weighted":
                weights = ops.softmax(ops.cast(self.window_logits, windows.dtype))[:, None]
            else:
                weights = ops.ones((self.pool_size, 1), windows.dtype)
            weights = ops.where(real, weights, ops.zeros_like(weights))  # (batch, n, p, 1)
            total = ops.maximum(ops.sum(weights, axis=2), keras.config.epsilon())
            pooled = ops.sum(weights * windows, axis=2) / ops.cast(total, windows.dtype)
        return ops.where(any_real[..., None], pooled, ops.zeros_like(pooled))

    def compute_mask(self, inputs, mask=None):
        if mask is None:
            return None
        # A window is real when one of its steps is: the max of the 0/1 mask over the windows
        # (a Keras op, so that it also runs on symbolic inputs of unknown length).
        real = ops.cast(mask, "float32")[..., None]  # (batch, T, 1)
        pooled = ops.max_pool(real, self.pool_size, self.strides, padding=self.padding)
        return pooled[..., 0] > 0.5

    def compute_output_shape(self, input_shape):
        batch, length, features = input_shape
        if length is None:
            return (batch, None, features)
        p, s = self.pool_size, self.strides
        count = max((length - p) // s + 1, 0) if self.padding == "valid" else -(-length // s)
        return (batch, count, features)

    def get_config(self):
        config = super().get_config()
        config.update(
            pool_size=self.pool_size, strides=self.strides, mode=self.mode, padding=self.padding
        )
        return config
