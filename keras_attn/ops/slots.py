"""Writing new entries into a preallocated cache with core ops only."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.ops.write_slots")
def write_slots(cache, update, index, axis: int):
    """`cache` with slots `index .. index + n - 1` of `axis` replaced by `update` (n slots).

        out[..., s, ...] = update[..., s - index, ...]   if index <= s < index + n
                           cache[..., s, ...]            otherwise

    The same values as `keras.ops.slice_update(cache, start, update)`, computed with a gather and
    a select instead: on TensorFlow, `slice_update` is the XLA op `XlaDynamicUpdateSlice`, whose
    CPU kernel compiles with XLA at run time and so fails in a model server that disables XLA
    compilation (stock TensorFlow Serving without `--xla_cpu_compilation_enabled`).

    Args:
        cache: the tensor to write into, `S` slots along `axis`.
        update: the new entries, `n <= S - index` slots along `axis`, the other dims as `cache`'s.
        index: int scalar (a tensor in a graph), the first slot written.
        axis: the slot axis (non-negative).

    Returns:
        A tensor of `cache`'s shape and `update`'s dtype.

    Example:

    >>> cache = ops.zeros((1, 5))
    >>> ops.convert_to_numpy(write_slots(cache, ops.ones((1, 2)), 2, axis=1)).tolist()
    [[0.0, 0.0, 1.0, 1.0, 0.0]]
    """
    slots = ops.shape(cache)[axis]
    count = ops.shape(update)[axis]
    offset = ops.arange(slots, dtype="int32") - ops.cast(index, "int32")  # (S,)
    written = ops.logical_and(offset >= 0, offset < count)
    gathered = ops.take(update, ops.clip(offset, 0, count - 1), axis=axis)
    shape = [1] * len(cache.shape)
    shape[axis] = -1
    return ops.where(ops.reshape(written, shape), gathered, ops.cast(cache, update.dtype))
