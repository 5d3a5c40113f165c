"""Gradient plumbing: identities in the forward pass that change what flows backwards."""

from __future__ import annotations

from keras import ops


def scale_gradient(x, scale: float):
    """`x` unchanged in the forward pass; its gradient multiplied by `scale` in the backward pass.

    `stop_gradient(x) + scale * (x - stop_gradient(x))`: for finite `x` the difference is exactly
    zero, so the value is `x` bit for bit, and only the second term carries a gradient, `scale`
    times the incoming one. On a weight read inside a layer it scales that weight's update under
    plain SGD by `scale` (a per-weight learning rate); Adam's steps, normalised by the gradient's
    running magnitude, stay nearly the same.

    Args:
        x: a tensor or a Keras variable.
        scale: a Python number; `1.0` returns `x` itself.

    Example:

    >>> import tensorflow as tf
    >>> x = tf.constant([1.0, 2.0])
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = tf.reduce_sum(scale_gradient(x, 0.25) ** 2)
    >>> tape.gradient(y, x).numpy().tolist()
    [0.5, 1.0]
    """
    if scale == 1.0:
        return x
    x = ops.convert_to_tensor(x)
    frozen = ops.stop_gradient(x)
    return frozen + ops.cast(scale, x.dtype) * (x - frozen)
