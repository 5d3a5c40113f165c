"""TensorProto <-> NumPy against TensorFlow's own conversion, and the layout read before any
tensor is built (what a proto declares, carries and would grow by)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2

from keras_attn.serving.tensors import (
    STRING_ELEMENT_OVERHEAD,
    ndarray_to_tensor_proto,
    tensor_proto_layout,
    tensor_proto_to_ndarray,
)

# (DataType, NumPy dtype, bytes per element) of every dtype a request may carry.
DTYPES = [
    (types_pb2.DT_FLOAT, np.float32, 4),
    (types_pb2.DT_DOUBLE, np.float64, 8),
    (types_pb2.DT_INT32, np.int32, 4),
    (types_pb2.DT_UINT8, np.uint8, 1),
    (types_pb2.DT_INT16, np.int16, 2),
    (types_pb2.DT_INT8, np.int8, 1),
    (types_pb2.DT_UINT16, np.uint16, 2),
    (types_pb2.DT_INT64, np.int64, 8),
    (types_pb2.DT_UINT32, np.uint32, 4),
    (types_pb2.DT_UINT64, np.uint64, 8),
    (types_pb2.DT_BOOL, np.bool_, 1),
    (types_pb2.DT_HALF, np.float16, 2),
    (types_pb2.DT_BFLOAT16, ml_dtypes.bfloat16, 2),
    (types_pb2.DT_COMPLEX64, np.complex64, 8),
    (types_pb2.DT_COMPLEX128, np.complex128, 16),
]
IDS = [types_pb2.DataType.Name(d) for d, _, _ in DTYPES]


def proto_with_one_value(dtype, dims):
    """A proto declaring `dims` and carrying one value (1, or 'x'), in the typed field."""
    proto = ndarray_to_tensor_proto(np.ones([1], dtype=np.float64).astype(_numpy(dtype)), dtype)
    del proto.tensor_shape.dim[:]
    for size in dims:
        proto.tensor_shape.dim.add(size=size)
    return proto


def _numpy(dtype):
    return dict((d, n) for d, n, _ in DTYPES)[dtype]


@pytest.mark.parametrize("dtype, numpy_dtype, itemsize", DTYPES, ids=IDS)
def test_filling_matches_tensorflow_and_the_layout_counts_its_bytes(dtype, numpy_dtype, itemsize):
    proto = proto_with_one_value(dtype, [3, 4])
    layout = tensor_proto_layout(proto)
    assert (layout.dims, layout.elements, layout.carried) == ([3, 4], 12, 1)
    assert layout.fill_bytes == 11 * itemsize
    array = tensor_proto_to_ndarray(proto)
    np.testing.assert_array_equal(array, tf.make_ndarray(proto))
    assert array.dtype == np.dtype(numpy_dtype) and array.shape == (3, 4)
    # No values at all: zeros, the whole tensor counted as fill.
    proto.ClearField(proto.ListFields()[-1][0].name)  # the typed *_val field
    assert tensor_proto_layout(proto).fill_bytes == 12 * itemsize
    np.testing.assert_array_equal(tensor_proto_to_ndarray(proto), np.zeros((3, 4), numpy_dtype))


@pytest.mark.parametrize("dtype, numpy_dtype, itemsize", DTYPES, ids=IDS)
def test_a_bomb_is_described_without_being_expanded(dtype, numpy_dtype, itemsize):
    # 2^62 elements: the layout is plain integer arithmetic, nothing is allocated.
    proto = proto_with_one_value(dtype, [2**31, 2**31])
    layout = tensor_proto_layout(proto)
    assert layout.elements == 2**62
    assert layout.fill_bytes == (2**62 - 1) * itemsize
    assert proto.ByteSize() < 100


def test_string_fill_counts_the_overhead_and_the_repeated_string():
    proto = tf.make_tensor_proto(["abc", "hello"], dtype=tf.string)
    proto.tensor_shape.dim[0].size = 10
    layout = tensor_proto_layout(proto)
    assert (layout.elements, layout.carried) == (10, 2)
    assert layout.fill_bytes == 8 * (STRING_ELEMENT_OVERHEAD + len("hello"))
    assert tensor_proto_to_ndarray(proto).tolist() == [b"abc"] + [b"hello"] * 9
    empty = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING)
    empty.tensor_shape.dim.add(size=10_000_000)
    assert tensor_proto_layout(empty).fill_bytes == 10_000_000 * STRING_ELEMENT_OVERHEAD
    assert empty.ByteSize() < 40


def test_a_proto_carrying_every_value_never_fills():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    for proto in (tf.make_tensor_proto(array), ndarray_to_tensor_proto(array)):
        layout = tensor_proto_layout(proto)
        assert (layout.carried, layout.fill_bytes) == (12, 0)
        np.testing.assert_array_equal(tensor_proto_to_ndarray(proto), array)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda p: setattr(p, "tensor_content", p.tensor_content[:-1]), "tensor_content has 15"),
        (lambda p: p.tensor_shape.dim.add(size=-1), "negative dim"),
        (lambda p: setattr(p.tensor_shape, "unknown_rank", True), "unknown rank"),
        (lambda p: setattr(p, "dtype", types_pb2.DT_RESOURCE), "unsupported dtype DT_RESOURCE"),
    ],
    ids=["short content", "negative dim", "unknown rank", "unsupported dtype"],
)
def test_what_tensor_from_proto_refuses_is_refused_by_the_layout(mutate, message):
    proto = tf.make_tensor_proto(np.arange(4, dtype=np.float32))
    mutate(proto)
    with pytest.raises(ValueError, match=message):
        tensor_proto_layout(proto)
    with pytest.raises(ValueError, match=message):
        tensor_proto_to_ndarray(proto)


def test_complex_values_come_in_pairs():
    proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_COMPLEX64, scomplex_val=[1.0, 2.0, 3.0])
    proto.tensor_shape.dim.add(size=2)
    with pytest.raises(ValueError, match="pairs"):
        tensor_proto_layout(proto)
    proto.scomplex_val.append(4.0)
    np.testing.assert_array_equal(tensor_proto_to_ndarray(proto), [1 + 2j, 3 + 4j])
