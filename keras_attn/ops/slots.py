"""Writing new entries into a preallocated cache with core ops only."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.ops.shapes import dimension


@keras_attn_export("keras_attn.ops.write_slots")
def write_slots(cache, update, index, axis: int, coordinates=None):
    """`cache` with slots `index .. index + n - 1` of `axis` replaced by `update` (n slots).

        out[..., s, ...] = update[..., s - index, ...]   if index <= s < index + n
                           cache[..., s, ...]            otherwise

    The same values as `keras.ops.slice_update(cache, start, update)`, computed with a scatter of
    the `n` slots (`keras.ops.scatter_update`, TensorFlow's `TensorScatterUpdate`) instead: on
    TensorFlow, `slice_update` is the XLA op `XlaDynamicUpdateSlice`, whose CPU kernel compiles
    with XLA at run time and so fails in a model server that disables XLA compilation (stock
    TensorFlow Serving without `--xla_cpu_compilation_enabled`). The scatter copies `cache` once
    and writes only the new slots (a select over every slot, the other core-op form, took about
    six times as long per decoding step on a CPU: `benchmarks/README.md`).

    Args:
        cache: the tensor to write into, `S` slots along `axis`.
        update: the new entries, `n <= S - index` slots along `axis`, the other dims as `cache`'s.
        index: int scalar (a tensor in a graph), the first slot written; `index + n <= S` (on
            TensorFlow a slot past the end is an `InvalidArgumentError`).
        axis: the slot axis (non-negative).
        coordinates: `slot_coordinates(update, index, axis)`, when already computed for an
            update of the same leading shape; computed here when None.

    Returns:
        A tensor of `cache`'s shape and `update`'s dtype.

    Example:

    >>> cache = ops.zeros((1, 5))
    >>> ops.convert_to_numpy(write_slots(cache, ops.ones((1, 2)), 2, axis=1)).tolist()
    [[0.0, 0.0, 1.0, 1.0, 0.0]]
    """
    _check_axis(axis, cache)
    if coordinates is None:
        coordinates = slot_coordinates(update, index, axis)
    trailing = tuple(dimension(update, a) for a in range(axis + 1, len(update.shape)))
    updates = ops.reshape(update, (-1, *trailing))
    return ops.scatter_update(ops.cast(cache, update.dtype), coordinates, updates)


@keras_attn_export("keras_attn.ops.slot_coordinates")
def slot_coordinates(update, index, axis: int):
    """The scatter coordinates of `write_slots(cache, update, index, axis)`: one row per written
    slot, `(prod(update.shape[:axis + 1]), axis + 1)` int32, holding every position of the axes
    before `axis` and the slot `index + j`.

    Computed once and passed to several `write_slots` calls whose updates have the same leading
    shape (the keys and values of one attention layer), the coordinates are built once per step.

    Args:
        update: the new entries (only its shape up to `axis` is read).
        index: int scalar, the first slot written.
        axis: the slot axis (non-negative).

    Returns:
        An int32 tensor `(rows, axis + 1)`.

    Example:

    >>> ops.convert_to_numpy(slot_coordinates(ops.ones((2, 1, 3)), 4, axis=1)).tolist()
    [[0, 4], [1, 4]]
    """
    _check_axis(axis, update)
    slots = ops.arange(dimension(update, axis), dtype="int32") + ops.cast(index, "int32")
    if axis == 0:
        return ops.expand_dims(slots, -1)
    axes = [ops.arange(dimension(update, a), dtype="int32") for a in range(axis)]
    grid = ops.meshgrid(*axes, slots, indexing="ij")
    return ops.reshape(ops.stack(grid, axis=-1), (-1, axis + 1))


def _check_axis(axis: int, x) -> None:
    if not 0 <= axis < len(x.shape):
        raise ValueError(f"Expected 0 <= axis < rank ({len(x.shape)}). Received: axis={axis}")
