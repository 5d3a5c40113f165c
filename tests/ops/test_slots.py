import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from keras_attn.ops import write_slots


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


def test_a_graph_with_a_tensor_index_holds_no_xla_op():
    @tf.function(input_signature=[tf.TensorSpec((), tf.int32)])
    def write(index):
        return write_slots(tf.zeros((2, 6)), tf.ones((2, 1)), index, axis=1)

    np.testing.assert_array_equal(write(tf.constant(4)).numpy()[0], [0, 0, 0, 0, 1, 0])
    graph = write.get_concrete_function().graph
    assert not [op.type for op in graph.get_operations() if op.type.startswith("Xla")]


def test_output_takes_the_update_dtype():
    cache = ops.zeros((1, 3), "float32")
    out = write_slots(cache, ops.ones((1, 1), "float16"), 1, axis=1)
    assert ops.convert_to_numpy(out).dtype == np.float16
    np.testing.assert_array_equal(ops.convert_to_numpy(out), [[0, 1, 0]])
