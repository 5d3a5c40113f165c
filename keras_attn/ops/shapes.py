"""Shapes with their static dimensions as Python ints, so that graphs skip runtime shape ops."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.ops.dimension")
def dimension(x, axis: int):
    """The size of `x` along `axis`: a Python int when it is known at trace time, else a scalar
    tensor.

    `keras.ops.shape(x)[axis]` gives the static size too, but under a `tf.function` whose input
    has any unknown dimension it reads the whole shape at run time (a `Shape` and a
    `StridedSlice` op per call, repeated at every step of a decoding loop).

    Args:
        x: a tensor.
        axis: the axis (negative counts from the end).

    Returns:
        An int, or an int32 scalar tensor for a dimension unknown until run time.

    Example:

    >>> import numpy as np
    >>> dimension(np.zeros((2, 3)), -1)
    3
    """
    static = x.shape[axis]
    if static is None:
        return ops.shape(x)[axis]
    # An int, or under JAX's shape-polymorphic tracing (Keras' symbolic build) a symbolic size,
    # which JAX's ops take as it is.
    return int(static) if _is_int(static) else static


def _is_int(size) -> bool:
    """Whether a static size is a plain integer (not a symbolic one)."""
    try:
        int(size)
    except Exception:  # JAX's InconclusiveDimensionOperation for a symbolic size
        return False
    return True


@keras_attn_export("keras_attn.ops.leading_shape")
def leading_shape(x, trailing: int) -> tuple:
    """`x`'s shape without its last `trailing` axes, ready for `keras.ops.reshape`: static sizes
    as ints, the first axis as -1 when every other size is static (so no shape is read at run
    time and non-zero), else the runtime sizes.

    Args:
        x: a tensor of rank > `trailing`.
        trailing: how many trailing axes to leave out (>= 0).

    Returns:
        A tuple of ints and int32 scalar tensors, one per leading axis.

    Example:

    >>> import numpy as np
    >>> leading_shape(np.zeros((2, 3, 4)), 1)
    (2, 3)
    """
    rank = len(x.shape)
    if not 0 <= trailing < rank:
        raise ValueError(f"Expected 0 <= trailing < rank ({rank}). Received: trailing={trailing}")
    static = [x.shape[axis] for axis in range(rank - trailing)]
    # -1 is unambiguous only when every other size is a known non-zero int.
    if static[0] is None and all(d is not None and _is_int(d) and d > 0 for d in static[1:]):
        return (-1, *(int(d) for d in static[1:]))
    return tuple(dimension(x, axis) for axis in range(rank - trailing))
