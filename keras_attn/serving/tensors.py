"""`TensorProto` <-> NumPy conversion with the semantics of TensorFlow's C++ `Tensor`.

`tensor_proto_to_ndarray` accepts what `Tensor::FromProto` accepts (typed `*_val` fields or
`tensor_content`; fewer values than elements repeat the last one, none at all means zeros) and
rejects the rest with `ValueError`; `tf.make_ndarray` builds the array.

Written here because TensorFlow has no public function for it:

- `tensor_proto_layout` reads a proto's shape, the values it carries and the bytes filling it
  would add without materialising anything, so a server can refuse a 35-byte proto that
  declares ten million elements before it allocates them (`tf.make_ndarray` expands first).
- `ndarray_to_tensor_proto` writes the typed `*_val` fields like `Tensor::AsProtoField`, which
  is how stock TensorFlow Serving fills `PredictResponse.outputs`; `tf.make_tensor_proto`
  writes numbers to `tensor_content` instead.
- `dtype_string` and `format_shape` print dtypes and shapes as TensorFlow's C++ code does, so
  error messages read word for word as stock TensorFlow Serving's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

# DataType -> (NumPy dtype of the values, TensorProto field holding them).
_TYPES: dict[int, tuple[np.dtype, str]] = {
    types_pb2.DT_FLOAT: (np.dtype(np.float32), "float_val"),
    types_pb2.DT_DOUBLE: (np.dtype(np.float64), "double_val"),
    types_pb2.DT_INT32: (np.dtype(np.int32), "int_val"),
    types_pb2.DT_UINT8: (np.dtype(np.uint8), "int_val"),
    types_pb2.DT_INT16: (np.dtype(np.int16), "int_val"),
    types_pb2.DT_INT8: (np.dtype(np.int8), "int_val"),
    types_pb2.DT_UINT16: (np.dtype(np.uint16), "int_val"),
    types_pb2.DT_INT64: (np.dtype(np.int64), "int64_val"),
    types_pb2.DT_UINT32: (np.dtype(np.uint32), "uint32_val"),
    types_pb2.DT_UINT64: (np.dtype(np.uint64), "uint64_val"),
    types_pb2.DT_BOOL: (np.dtype(np.bool_), "bool_val"),
    types_pb2.DT_STRING: (np.dtype(object), "string_val"),
    types_pb2.DT_HALF: (np.dtype(np.float16), "half_val"),
    types_pb2.DT_BFLOAT16: (np.dtype(ml_dtypes.bfloat16), "half_val"),
    types_pb2.DT_COMPLEX64: (np.dtype(np.complex64), "scomplex_val"),
    types_pb2.DT_COMPLEX128: (np.dtype(np.complex128), "dcomplex_val"),
}
_HALF_TYPES = (types_pb2.DT_HALF, types_pb2.DT_BFLOAT16)
_COMPLEX_TYPES = (types_pb2.DT_COMPLEX64, types_pb2.DT_COMPLEX128)


def as_ndarray(value: Any) -> np.ndarray:
    """A tensor (anything with `.numpy()`) or array-like as a NumPy array."""
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def dtype_name(dtype: int) -> str:
    """The enum name of a DataType, e.g. `DT_STRING`."""
    try:
        return types_pb2.DataType.Name(dtype)
    except ValueError:
        return f"DT_UNKNOWN_{dtype}"


def dtype_string(dtype: int) -> str:
    """The short name TensorFlow's C++ `DataTypeString` gives a DataType, e.g. `string`, `float`."""
    name = dtype_name(dtype)
    return name[3:].lower() if name.startswith("DT_") else name


def dtype_from_numpy(dtype: np.dtype) -> int:
    """The DataType that holds values of a NumPy dtype (`object`, `bytes`, `str` -> DT_STRING)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return types_pb2.DT_STRING
    try:
        return tf.as_dtype(dtype).as_datatype_enum
    except TypeError:
        raise ValueError(f"No TensorFlow DataType for NumPy dtype {dtype}.") from None


def shape_dims(shape: tensor_shape_pb2.TensorShapeProto) -> list[int] | None:
    """The dims of a shape proto as a list (-1 for unknown dims), or None for an unknown rank."""
    if shape.unknown_rank:
        return None
    return [dim.size for dim in shape.dim]


def format_shape(dims: Sequence[int] | None) -> str:
    """Formats dims the way TensorFlow prints shapes: `[2,3]`, `[-1]`, `<unknown>`."""
    if dims is None:
        return "<unknown>"
    return "[" + ",".join(str(d) for d in dims) + "]"


def shape_is_compatible(dims: Sequence[int], expected: Sequence[int] | None) -> bool:
    """Whether a concrete shape fits a signature shape (same rank; fixed dims equal)."""
    if expected is None:
        return True
    if len(dims) != len(expected):
        return False
    return all(e < 0 or d == e for d, e in zip(dims, expected, strict=True))


# What one string element costs once materialised, beyond its bytes: the NumPy object pointer
# and TensorFlow's `tstring` (8 + 24 bytes on 64-bit hosts).
STRING_ELEMENT_OVERHEAD = 32


@dataclasses.dataclass(frozen=True)
class TensorLayout:
    """What a TensorProto declares and carries, read without materialising it.

    Attributes:
        dims: the declared shape.
        elements: the declared element count (the product of `dims`).
        carried: how many values the proto carries (typed field or `tensor_content`).
        fill_bytes: the bytes that filling the missing `elements - carried` values (repeating
            the last one, or zeros / empty strings when none is carried) would add; a string
            element counts `STRING_ELEMENT_OVERHEAD` plus its length.
    """

    dims: list[int]
    elements: int
    carried: int
    fill_bytes: int


def tensor_proto_layout(proto: tensor_pb2.TensorProto) -> TensorLayout:
    """Reads a TensorProto's shape and value counts, checking what `Tensor::FromProto` checks.

    Costs nothing proportional to the declared shape: a proto declaring `[1000000000]` with one
    value is described, not expanded.

    Raises:
        ValueError: where TensorFlow's `Tensor::FromProto` would fail: an unknown or unsupported
            dtype, a negative or unknown dim, or a `tensor_content` of the wrong size.
    """
    if proto.dtype not in _TYPES:
        raise ValueError(f"unsupported dtype {dtype_name(proto.dtype)}")
    if proto.tensor_shape.unknown_rank:
        raise ValueError("tensor shape has unknown rank")
    dims = [dim.size for dim in proto.tensor_shape.dim]
    if any(d < 0 for d in dims):
        raise ValueError(f"tensor shape {format_shape(dims)} has a negative dim")
    np_dtype, field = _TYPES[proto.dtype]
    elements = math.prod(dims)  # Python ints: no overflow, however large the dims
    if proto.tensor_content and proto.dtype != types_pb2.DT_STRING:
        if len(proto.tensor_content) != elements * np_dtype.itemsize:
            raise ValueError(
                f"tensor_content has {len(proto.tensor_content)} bytes, "
                f"shape {format_shape(dims)} needs {elements * np_dtype.itemsize}"
            )
        return TensorLayout(dims, elements, elements, 0)
    values = getattr(proto, field)
    carried = len(values)
    if proto.dtype in _COMPLEX_TYPES:
        if carried % 2:
            raise ValueError(f"{field} holds {carried} numbers, not (real, imaginary) pairs")
        carried //= 2
    missing = max(elements - carried, 0)
    if proto.dtype == types_pb2.DT_STRING:
        last = len(values[-1]) if carried else 0
        fill_bytes = missing * (STRING_ELEMENT_OVERHEAD + last)
    else:
        fill_bytes = missing * np_dtype.itemsize
    return TensorLayout(dims, elements, carried, fill_bytes)


def tensor_proto_to_ndarray(proto: tensor_pb2.TensorProto) -> np.ndarray:
    """Converts a TensorProto to a NumPy array (strings as an object array of `bytes`).

    Fewer values than elements repeat the last one, none at all means zeros (empty strings), as
    in TensorFlow; check `tensor_proto_layout(proto).fill_bytes` first where the proto comes
    from an untrusted sender.

    Raises:
        ValueError: where TensorFlow's `Tensor::FromProto` would fail (see `tensor_proto_layout`).
    """
    layout = tensor_proto_layout(proto)
    is_string = proto.dtype == types_pb2.DT_STRING
    if layout.carried > layout.elements or (
        is_string and (proto.tensor_content or not layout.carried)
    ):
        proto = _as_make_ndarray_reads_it(proto, layout.elements)
    return tf.make_ndarray(proto)


def _as_make_ndarray_reads_it(
    proto: tensor_pb2.TensorProto, elements: int
) -> tensor_pb2.TensorProto:
    """A copy of `proto` that `tf.make_ndarray` reads as `Tensor::FromProto` reads `proto`.

    `tf.make_ndarray` refuses more values than elements (`Tensor::FromProto` ignores the extra
    ones), fills a string tensor carrying no value with `str` rather than `bytes`, and fails on
    a string tensor's `tensor_content`; the copy keeps the first `elements` values of the typed
    field only, and one empty string where a non-empty string tensor carries none.
    """
    field = _TYPES[proto.dtype][1]
    numbers_per_value = 2 if proto.dtype in _COMPLEX_TYPES else 1
    copy = tensor_pb2.TensorProto(dtype=proto.dtype, tensor_shape=proto.tensor_shape)
    getattr(copy, field).extend(getattr(proto, field)[: elements * numbers_per_value])
    if proto.dtype == types_pb2.DT_STRING and not copy.string_val and elements:
        copy.string_val.append(b"")
    return copy


def ndarray_to_tensor_proto(array: np.ndarray, dtype: int | None = None) -> tensor_pb2.TensorProto:
    """Converts an array to a TensorProto with its values in the typed `*_val` field.

    This is the layout of `Tensor::AsProtoField`, which stock TensorFlow Serving uses for
    `PredictResponse.outputs`; `tf.make_tensor_proto` would write numbers to `tensor_content`.

    Args:
        array: the values; strings may be `bytes` or `str` (encoded as UTF-8).
        dtype: the DataType to write; by default the one matching `array.dtype`.
    """
    array = np.asarray(array)
    if dtype is None:
        dtype = dtype_from_numpy(array.dtype)
    if dtype not in _TYPES:
        raise ValueError(f"Cannot serialize a tensor of dtype {dtype_name(dtype)}.")
    np_dtype, field = _TYPES[dtype]
    proto = tensor_pb2.TensorProto(dtype=dtype)
    for size in array.shape:
        proto.tensor_shape.dim.add(size=size)
    flat = array.reshape(-1)
    if dtype == types_pb2.DT_STRING:
        proto.string_val.extend(v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in flat)
    elif dtype in _HALF_TYPES:
        proto.half_val.extend(flat.astype(np_dtype).view(np.uint16).tolist())
    elif dtype in _COMPLEX_TYPES:
        flat = flat.astype(np_dtype)
        interleaved = np.stack([flat.real, flat.imag], axis=-1).reshape(-1)
        getattr(proto, field).extend(interleaved.tolist())
    else:
        getattr(proto, field).extend(flat.astype(np_dtype).tolist())
    return proto
