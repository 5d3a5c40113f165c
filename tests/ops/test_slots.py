import numpy as np
import pytest
from keras import ops

from keras_attn.ops import slot_coordinates, write_slots
from tests.lazy_tf import tf

pytestmark = pytest.mark.every_backend


@pytest.mark.parametrize("axis, index, count", [(1, 0, 1), (1, 3, 2), (2, 4, 1), (2, 0, 5)])
def test_equals_slice_update_and_a_numpy_reference(axis, index, count):
    rng = np.random.default_rng(axis + index + count)
    cache = rng.normal(size=(2, 5, 5, 3)).astype("float32")
    shape = list(cache.shape)
    shape[axis] = count
    update = rng.normal(size=shape).astype("float32")
    expected = cache.copy()
    where = [slice(None)] * 4
    where[axis] = slice(index, index + count)
    expected[tuple(where)] = update
    got = ops.convert_to_numpy(write_slots(cache, update, index, axis=axis))
    np.testing.assert_array_equal(got, expected)
    start = [0] * 4
    start[axis] = index
    np.testing.assert_array_equal(got, ops.convert_to_numpy(ops.slice_update(cache, start, update)))


@pytest.mark.tensorflow_only
def test_a_graph_with_a_tensor_index_holds_no_xla_op():
    @tf.function(input_signature=[tf.TensorSpec((), tf.int32)])
    def write(index):
        return write_slots(tf.zeros((2, 6)), tf.ones((2, 1)), index, axis=1)

    np.testing.assert_array_equal(
        ops.convert_to_numpy(write(tf.constant(4)))[0], [0, 0, 0, 0, 1, 0]
    )
    graph = write.get_concrete_function().graph
    assert not [op.type for op in graph.get_operations() if op.type.startswith("Xla")]


def test_output_takes_the_update_dtype():
    cache = ops.zeros((1, 3), "float32")
    out = write_slots(cache, ops.ones((1, 1), "float16"), 1, axis=1)
    assert ops.convert_to_numpy(out).dtype == np.float16
    np.testing.assert_array_equal(ops.convert_to_numpy(out), [[0, 1, 0]])


def numpy_write(cache, update, index, axis):
    expected = cache.astype(update.dtype).copy()
    where = [slice(None)] * cache.ndim
    where[axis] = slice(index, index + update.shape[axis])
    expected[tuple(where)] = update
    return expected


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("count", [1, 3])
def test_unknown_batch_and_count_in_a_graph(count):
    """As in an exported decoding loop: the batch (and here the slot count) known at run time."""
    spec = tf.TensorSpec([None, 2, None, 3], tf.float32)

    @tf.function(input_signature=[spec, spec, tf.TensorSpec((), tf.int32)])
    def write(cache, update, index):
        return write_slots(cache, update, index, axis=2)

    rng = np.random.default_rng(count)
    cache = rng.normal(size=(4, 2, 7, 3)).astype("float32")
    update = rng.normal(size=(4, 2, count, 3)).astype("float32")
    got = ops.convert_to_numpy(write(cache, update, tf.constant(2)))
    np.testing.assert_array_equal(got, numpy_write(cache, update, 2, axis=2))


def test_coordinates_are_one_row_per_slot_and_can_be_shared():
    update = np.ones((2, 3, 2, 1), "float32")
    coordinates = ops.convert_to_numpy(slot_coordinates(update, 4, axis=2))
    expected = [[b, h, 4 + j] for b in range(2) for h in range(3) for j in range(2)]
    np.testing.assert_array_equal(coordinates, expected)
    rng = np.random.default_rng(1)
    keys = rng.normal(size=(2, 3, 8, 1)).astype("float32")
    values = rng.normal(size=(2, 3, 8, 1)).astype("float32")
    new_keys = rng.normal(size=(2, 3, 2, 1)).astype("float32")
    new_values = rng.normal(size=(2, 3, 2, 1)).astype("float32")
    shared = slot_coordinates(new_keys, 4, axis=2)
    for cache, update in ((keys, new_keys), (values, new_values)):
        got = ops.convert_to_numpy(write_slots(cache, update, 4, 2, coordinates=shared))
        np.testing.assert_array_equal(got, numpy_write(cache, update, 4, axis=2))
    np.testing.assert_array_equal(
        ops.convert_to_numpy(slot_coordinates(np.ones((3, 1)), 2, axis=0)), [[2], [3], [4]]
    )


def test_bool_and_int_caches():
    mask = np.ones((2, 5), bool)
    got = ops.convert_to_numpy(write_slots(mask, np.zeros((2, 1), bool), 3, axis=1))
    np.testing.assert_array_equal(got, numpy_write(mask, np.zeros((2, 1), bool), 3, axis=1))
    ints = np.arange(10, dtype="int32").reshape(2, 5)
    got = ops.convert_to_numpy(write_slots(ints, np.full((2, 2), -1, "int32"), 0, axis=1))
    np.testing.assert_array_equal(got, [[-1, -1, 2, 3, 4], [-1, -1, 7, 8, 9]])


def test_bad_axis():
    with pytest.raises(ValueError, match="axis=2"):
        write_slots(np.zeros((2, 3)), np.zeros((2, 1)), 0, axis=2)
    with pytest.raises(ValueError, match="axis=-1"):
        slot_coordinates(np.zeros((2, 1)), 0, axis=-1)


@pytest.mark.tensorflow_only
def test_a_slot_past_the_end_is_an_error_not_a_silent_drop():
    with pytest.raises(tf.errors.InvalidArgumentError):
        write_slots(np.zeros((2, 4), "float32"), np.ones((2, 2), "float32"), 3, axis=1)
