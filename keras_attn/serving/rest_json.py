"""The JSON of TensorFlow Serving's REST API: request bodies in, response bodies out.

Requests: `{"instances": [...]}` (row format: one value or object per example) or
`{"inputs": ...}` (columnar format: one value or list per input) for predict, checked against the
signature's input dtypes, with `{"b64": "..."}` for binary strings; `{"examples": [...],
"context": {...}}` of tf.Example features for classify and regress. Every malformed body is an
INVALID_ARGUMENT with the stock server's message, JSON nested deeper than `--max_json_depth`,
numbers Python cannot hold and numbers a float cannot hold exactly included.

Responses: `{"predictions": [...]}` or `{"outputs": ...}` in the format of the request (output
names ending in `_bytes` as `{"b64": "..."}`), `{"results": [...]}` for classify and regress,
and model status and metadata as `google.protobuf.json_format` writes the messages.

Follows tensorflow/serving `model_servers/http_rest_api_util.cc` and `util/json_tensor.cc`;
the messages are written by hand to read word for word as the stock server's (RapidJSON's parse
errors included), which no JSON library gives.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    model_pb2,
    predict_pb2,
    regression_pb2,
)

from keras_attn.serving.core import SIGNATURE_DEF_FIELD
from keras_attn.serving.limits import RequestLimits
from keras_attn.serving.status import (
    ERROR_MESSAGE_LIMIT,
    ServingStatus,
    invalid_argument,
    unimplemented,
)
from keras_attn.serving.tensors import dtype_string, tensor_proto_to_ndarray

ROW_FORMAT, COLUMNAR_FORMAT = "row", "columnar"
INT64_MAX = 2**63 - 1

_FLOAT32_MAX_INT = (1 << 24) - 1
_FLOAT64_MAX_INT = (1 << 53) - 1
_INT_RANGES = {
    types_pb2.DT_INT32: (-(2**31), 2**31 - 1),
    types_pb2.DT_INT16: (-(2**31), 2**31 - 1),
    types_pb2.DT_INT8: (-(2**31), 2**31 - 1),
    types_pb2.DT_UINT8: (-(2**31), 2**31 - 1),
    types_pb2.DT_INT64: (-(2**63), 2**63 - 1),
    types_pb2.DT_UINT32: (0, 2**32 - 1),
    types_pb2.DT_UINT64: (0, 2**64 - 1),
}
_INT32_FIELD_TYPES = (types_pb2.DT_INT16, types_pb2.DT_INT8, types_pb2.DT_UINT8)
_NUMPY_FOR_JSON = {
    types_pb2.DT_FLOAT: np.float32,
    types_pb2.DT_DOUBLE: np.float64,
    types_pb2.DT_INT32: np.int32,
    types_pb2.DT_INT16: np.int16,
    types_pb2.DT_INT8: np.int8,
    types_pb2.DT_UINT8: np.uint8,
    types_pb2.DT_INT64: np.int64,
    types_pb2.DT_UINT32: np.uint32,
    types_pb2.DT_UINT64: np.uint64,
    types_pb2.DT_BOOL: np.bool_,
    types_pb2.DT_STRING: object,
}


# ---------------------------------------------------------------------- JSON helpers


def _json_text(value: Any) -> str:
    """A JSON value as text, for error messages: cut after `ERROR_MESSAGE_LIMIT` characters,
    encoding no more of it than that (a 16 MiB body is not written out again)."""
    parts: list[str] = []
    size = 0
    for chunk in json.JSONEncoder(indent=4, ensure_ascii=False).iterencode(value):
        parts.append(chunk)
        size += len(chunk)
        if size > ERROR_MESSAGE_LIMIT:
            return "".join(parts)[:ERROR_MESSAGE_LIMIT] + "..."
    return "".join(parts)


def _json_type(value: Any) -> str:
    if value is None:
        return "Null"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _format_error(doc: Any, *parts: object) -> ServingStatus:
    return invalid_argument(f"JSON Value: {_json_text(doc)} " + "".join(str(p) for p in parts))


def _type_error(value: Any, dtype: int) -> ServingStatus:
    return invalid_argument(
        f"JSON Value: {_json_text(value)} Type: {_json_type(value)} is not of expected type: "
        f"{dtype_string(dtype)}"
    )


def _utf8(text: str) -> bytes:
    """A JSON string as UTF-8; a lone surrogate escape (`"\\udcff"`) is refused as RapidJSON,
    the stock server's parser, refuses it."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid_argument(
            "JSON Parse error: The surrogate pair in string is invalid."
        ) from None


def _is_base64_object(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def _decode_base64(value: Any) -> bytes:
    if not _is_base64_object(value):
        raise invalid_argument(
            f"JSON Value: {_json_text(value)} not formatted correctly for base64 data"
        )
    try:
        return base64.b64decode(value["b64"], validate=True)
    except (binascii.Error, ValueError):
        raise invalid_argument("Unable to base64 decode") from None


def _lossless(value: int | float, dtype: int) -> bool:
    max_int, max_float = (
        (_FLOAT32_MAX_INT, float(np.finfo(np.float32).max))
        if dtype == types_pb2.DT_FLOAT
        else (_FLOAT64_MAX_INT, float(np.finfo(np.float64).max))
    )
    if isinstance(value, int):
        return abs(value) <= max_int
    return not math.isfinite(value) or -max_float <= value <= max_float


def _json_scalar(value: Any, dtype: int) -> Any:
    """Checks one JSON leaf against a DataType and returns the value to store."""
    if dtype in (types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE):
        if not _is_number(value):
            raise _type_error(value, dtype)
        if not _lossless(value, dtype):
            target = "float" if dtype == types_pb2.DT_FLOAT else "double"
            raise invalid_argument(
                f"Cannot convert JSON value: {_json_text(value)} to {target} "
                "without loss of precision."
            )
        return value
    if dtype in _INT_RANGES:
        low, high = _INT_RANGES[dtype]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise _type_error(value, dtype)
        return value
    if dtype == types_pb2.DT_STRING:
        if not isinstance(value, str):
            raise _type_error(value, dtype)
        return _utf8(value)
    if dtype == types_pb2.DT_BOOL:
        if not isinstance(value, bool):
            raise _type_error(value, dtype)
        return value
    raise unimplemented(
        f"Conversion of JSON Value: {_json_text(value)} to type: {dtype_string(dtype)}"
    )


def _dense_shape(value: Any) -> list[int]:
    """The shape of nested lists, following the first element at every level."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _fill_values(value: Any, level: int, dtype: int, shape: list[int], out: list) -> None:
    """Appends the leaves of `value` to `out`, checking they form a dense tensor of `shape`."""
    rank = len(shape)
    if not isinstance(value, list):
        if level != rank:
            raise invalid_argument(
                f"JSON Value: {_json_text(value)} found at incorrect level: {level + 1} in the "
                f"JSON DOM. Expected at level: {rank}"
            )
        if isinstance(value, dict):
            if dtype != types_pb2.DT_STRING:
                raise _type_error(value, dtype)
            out.append(_decode_base64(value))
        else:
            out.append(_json_scalar(value, dtype))
        return
    if level >= rank:
        raise invalid_argument(f"Encountered list at unexpected level: {level} expected < {rank}")
    if len(value) != shape[level]:
        raise invalid_argument(
            f"Encountered list at unexpected size: {len(value)} at level: {level} "
            f"expected size: {shape[level]}"
        )
    for item in value:
        _fill_values(item, level + 1, dtype, shape, out)


def _values_to_tensor(values: list, shape: list[int], dtype: int) -> Any:
    if dtype not in _NUMPY_FOR_JSON:
        raise unimplemented(f"Conversion of JSON values to type: {dtype_string(dtype)}")
    if dtype in _INT32_FIELD_TYPES:
        # Stock keeps these in the proto's 32-bit int_val and casts on parsing: values outside
        # the type's range wrap around, as there.
        array = np.array(values, dtype=np.int64).astype(_NUMPY_FOR_JSON[dtype])
    else:
        array = np.empty(len(values), dtype=_NUMPY_FOR_JSON[dtype])
        array[:] = values
    return tf.make_tensor_proto(array.reshape(shape), dtype=tf.as_dtype(dtype))


def _shape_text(shape: list[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _is_element_object(value: Any) -> bool:
    return isinstance(value, dict) and not _is_base64_object(value)


def _status_text(status: ServingStatus) -> str:
    return f"{status.code.name}: {status.message}"


# ---------------------------------------------------------------------- JSON -> requests


def _parse_json(body: bytes, max_depth: int) -> dict:
    """Parses a request body: a JSON object nested at most `max_depth` levels deep."""
    if not body:
        raise invalid_argument("JSON Parse error: The document is empty")
    too_deep = invalid_argument(
        f"JSON Parse error: The document is nested more than {max_depth} levels deep "
        "(--max_json_depth)"
    )
    try:
        doc = json.loads(body)
    except json.JSONDecodeError as error:
        raise invalid_argument(f"JSON Parse error: {error.msg} at offset: {error.pos}") from None
    except UnicodeDecodeError as error:
        raise invalid_argument(
            f"JSON Parse error: {error.reason} at offset: {error.start}"
        ) from None
    except RecursionError:
        raise too_deep from None
    except ValueError:  # an integer of more digits than Python converts (4300)
        raise invalid_argument("JSON Parse error: Number too big to be stored in double.") from None
    if _deeper_than(doc, max_depth):
        raise too_deep
    if not isinstance(doc, dict):
        raise _format_error(doc, "Is not object")
    return doc


def _deeper_than(doc: Any, max_depth: int) -> bool:
    """Whether arrays and objects nest more than `max_depth` levels (checked without recursion:
    everything after this check may recurse over the document)."""
    stack = [(doc, 1)] if isinstance(doc, dict | list) else []
    while stack:
        value, depth = stack.pop()
        if depth > max_depth:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _fill_signature(doc: dict, model_spec: model_pb2.ModelSpec) -> None:
    if "signature_name" in doc:
        if not isinstance(doc["signature_name"], str):
            raise invalid_argument(
                f"JSON Value: {_json_text(doc)} not formatted correctly. 'signature_name' key "
                "must be a string value."
            )
        model_spec.signature_name = doc["signature_name"]


def _instances_to_tensors(
    instances: list, infos: Mapping[str, meta_graph_pb2.TensorInfo], request: Any
) -> None:
    if not isinstance(instances[0], dict) and len(infos) > 1:
        raise invalid_argument(
            "instances is a plain list, but expecting list of objects as multiple input "
            "tensors required as per tensorinfo_map"
        )
    objects = _is_element_object(instances[0])
    values: dict[str, list] = {}
    shapes: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}

    def add_item(item: Any, name: str) -> None:
        if name not in infos:
            raise invalid_argument(f"JSON object: does not have named input: {name}")
        shape = _dense_shape(item)
        out: list = []
        _fill_values(item, 0, infos[name].dtype, shape, out)
        if name not in sizes:
            sizes[name], shapes[name] = len(out), shape
        elif sizes[name] != len(out):
            raise invalid_argument(f"Expecting tensor size: {sizes[name]} but got: {len(out)}")
        elif shapes[name] != shape:
            raise invalid_argument(
                f"Expecting shape {_shape_text(shapes[name])} but got: {_shape_text(shape)}"
            )
        values.setdefault(name, []).extend(out)

    for index, element in enumerate(instances):
        if objects:
            if not _is_element_object(element):
                raise invalid_argument(
                    f"Expecting object but got list at item {index} of input list"
                )
            for name, item in element.items():
                try:
                    add_item(item, name)
                except ServingStatus as status:
                    raise invalid_argument(
                        f"Failed to process element: {index} key: {name} of 'instances' list. "
                        f"Error: {_status_text(status)}"
                    ) from None
            if set(element) != set(infos):
                raise invalid_argument(
                    f"Failed to process element: {index} of 'instances' list. JSON object: "
                    f"{_json_text(element)} keys must be equal to: {','.join(sorted(infos))}"
                )
        else:
            if _is_element_object(element):
                raise invalid_argument(
                    f"Expecting value/list but got object at item {index} of input list"
                )
            try:
                add_item(element, sorted(infos)[0])
            except ServingStatus as status:
                raise invalid_argument(
                    f"Failed to process element: {index} of 'instances' list. "
                    f"Error: {_status_text(status)}"
                ) from None
    for name, items in values.items():
        shape = [len(instances), *shapes[name]]
        request.inputs[name].CopyFrom(_values_to_tensor(items, shape, infos[name].dtype))


def _inputs_to_tensors(
    inputs: Any, infos: Mapping[str, meta_graph_pb2.TensorInfo], request: Any
) -> None:
    if not isinstance(inputs, dict) or _is_base64_object(inputs):
        if len(infos) > 1:
            raise invalid_argument(
                "inputs is a plain value/list, but expecting an object as multiple input "
                "tensors required as per tensorinfo_map"
            )
        named = {sorted(infos)[0]: inputs}
    else:
        named = {}
        for name in sorted(infos):
            if name not in inputs:
                raise invalid_argument(f"Missing named input: {name} in 'inputs' object.")
            named[name] = inputs[name]
    for name, value in named.items():
        shape = _dense_shape(value)
        out: list = []
        _fill_values(value, 0, infos[name].dtype, shape, out)
        request.inputs[name].CopyFrom(_values_to_tensor(out, shape, infos[name].dtype))


def fill_predict_request_from_json(
    body: bytes,
    get_inputs: Callable[[str], Mapping[str, meta_graph_pb2.TensorInfo]],
    request: predict_pb2.PredictRequest,
    max_depth: int = RequestLimits.max_json_depth,
) -> str:
    """Fills `request` from a REST predict body.

    Args:
        body: the request body, a JSON object with `instances` or `inputs`.
        get_inputs: the input `TensorInfo`s (dtypes) of the signature a name selects ("" for
            the default); called once, after the body's `signature_name` is read.
        request: the request to fill (`model_spec.signature_name` and `inputs`).
        max_depth: the deepest nesting of arrays and objects accepted.

    Returns:
        `ROW_FORMAT` for `instances`, `COLUMNAR_FORMAT` for `inputs`: the format the response
        is written in.

    Raises:
        ServingStatus: INVALID_ARGUMENT for a malformed body, with the stock server's message.
    """
    doc = _parse_json(body, max_depth)
    _fill_signature(doc, request.model_spec)
    signature_name = request.model_spec.signature_name
    infos = get_inputs(signature_name)
    if not infos:
        raise invalid_argument(
            f"Failed to get input map for signature: {signature_name or 'DEFAULT'}"
        )
    if "instances" in doc:
        if "inputs" in doc:
            raise _format_error(
                doc,
                "Not formatted correctly expecting only one of 'inputs' or 'instances' "
                "keys to exist ",
            )
        instances = doc["instances"]
        if not isinstance(instances, list):
            raise _format_error(doc, "Excepting 'instances' to be an list/array")
        if not instances:
            raise _format_error(doc, "No values in 'instances' array")
        _instances_to_tensors(instances, infos, request)
        return ROW_FORMAT
    if "inputs" in doc:
        _inputs_to_tensors(doc["inputs"], infos, request)
        return COLUMNAR_FORMAT
    raise invalid_argument("Missing 'inputs' or 'instances' key")


def _incompatible_kind(name: str, feature: feature_pb2.Feature) -> ServingStatus:
    kind = {"bytes_list": "bytes", "float_list": "float", "int64_list": "int64"}.get(
        feature.WhichOneof("kind"), "UNKNOWN"
    )
    return invalid_argument(f"Unexpected element type in feature: {name} expecting type: {kind}")


def _add_feature_value(value: Any, name: str, feature: feature_pb2.Feature) -> None:
    kind = feature.WhichOneof("kind")

    def require(expected: str) -> None:
        if kind not in (None, expected):
            raise _incompatible_kind(name, feature)

    if (
        value is None
        or isinstance(value, list)
        or (isinstance(value, dict) and not _is_base64_object(value))
    ):
        raise invalid_argument(
            f"Feature: {name} has element with unexpected JSON type: {_json_type(value)}"
        )
    if isinstance(value, bool):
        require("int64_list")
        feature.int64_list.value.append(1 if value else 0)
    elif isinstance(value, dict):
        require("bytes_list")
        feature.bytes_list.value.append(_decode_base64(value))
    elif isinstance(value, str):
        require("bytes_list")
        feature.bytes_list.value.append(_utf8(value))
    elif isinstance(value, float):
        require("float_list")
        if not _lossless(value, types_pb2.DT_FLOAT):
            raise invalid_argument(
                f"Cannot convert JSON value: {_json_text(value)} to float without loss of "
                "precision."
            )
        feature.float_list.value.append(value)
    else:
        require("int64_list")
        if value > INT64_MAX:
            raise invalid_argument(f"Feature: {name} has uint64 element. Only int64 is supported.")
        if value < -INT64_MAX - 1:
            raise invalid_argument(f"Feature: {name} has an integer element below the int64 range.")
        feature.int64_list.value.append(value)


def _example_from_json(value: Any, example: example_pb2.Example) -> None:
    if not isinstance(value, dict):
        raise invalid_argument(f"Example must be JSON object but got JSON {_json_type(value)}")
    for name, content in value.items():
        feature = feature_pb2.Feature()
        for item in content if isinstance(content, list) else [content]:
            _add_feature_value(item, name, feature)
        example.features.feature[name].CopyFrom(feature)


def fill_examples_request_from_json(
    body: bytes, request: Any, max_depth: int = RequestLimits.max_json_depth
) -> None:
    """Fills a Classification/RegressionRequest from a REST classify/regress body.

    Raises:
        ServingStatus: INVALID_ARGUMENT for a malformed body, with the stock server's message.
    """
    doc = _parse_json(body, max_depth)
    _fill_signature(doc, request.model_spec)
    if "context" in doc:
        with_context = request.input.example_list_with_context
        _example_from_json(doc["context"], with_context.context)
        examples = with_context.examples
    else:
        examples = request.input.example_list.examples
    if "examples" not in doc:
        raise _format_error(
            doc, "When method is classify, key 'examples' is expected and was not found"
        )
    if not isinstance(doc["examples"], list):
        raise _format_error(doc, "Expecting 'examples' value to be an list/array")
    if not doc["examples"]:
        raise _format_error(doc, "'examples' value is an empty array")
    for value in doc["examples"]:
        _example_from_json(value, examples.add())


# ---------------------------------------------------------------------- responses -> JSON


def _json_leaf(value: Any, as_bytes: bool) -> Any:
    if isinstance(value, bytes):
        if as_bytes:
            return {"b64": base64.b64encode(value).decode("ascii")}
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.floating):
        # Shortest text that reads back as the same value at its own precision (0.1, not
        # 0.10000000149011612 for a float32), as stock writes decimals.
        return float(str(value))
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def _json_tensor(value: Any, as_bytes: bool) -> Any:
    if not isinstance(value, np.ndarray):
        return _json_leaf(value, as_bytes)
    if value.ndim == 0:
        return _json_leaf(value[()], as_bytes)
    return [_json_tensor(item, as_bytes) for item in value]


def _is_bytes_output(name: str, array: np.ndarray) -> bool:
    return array.dtype == np.dtype(object) and name.endswith("_bytes")


def predict_response_to_json(response: predict_pb2.PredictResponse, format_: str) -> Any:
    """The REST body for a PredictResponse in the request's format (`ROW_FORMAT`:
    `{"predictions": [...]}`, one entry per batch row; `COLUMNAR_FORMAT`: `{"outputs": ...}`)."""
    if not response.outputs:
        raise invalid_argument("Cannot convert empty tensor map to JSON")
    arrays = {name: tensor_proto_to_ndarray(response.outputs[name]) for name in response.outputs}
    names = sorted(arrays)
    if format_ == COLUMNAR_FORMAT:
        values = {
            name: _json_tensor(arrays[name], _is_bytes_output(name, arrays[name])) for name in names
        }
        return {"outputs": values if len(names) > 1 else values[names[0]]}
    batch = -1
    for name in names:
        if arrays[name].ndim == 0:
            raise invalid_argument(f"Tensor name: {name} has no shape information ")
        if batch >= 0 and arrays[name].shape[0] != batch:
            raise invalid_argument(
                f"Tensor name: {name} has inconsistent batch size: {arrays[name].shape[0]} "
                f"expecting: {batch}"
            )
        batch = arrays[name].shape[0]
    rows = []
    for i in range(batch):
        row = {
            name: _json_tensor(arrays[name][i], _is_bytes_output(name, arrays[name]))
            for name in names
        }
        rows.append(row if len(names) > 1 else row[names[0]])
    return {"predictions": rows}


def message_to_json(message: Any) -> Any:
    """A message as the stock server writes it: proto field names, every field present."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def _float32_json(value: float) -> float:
    """A score as the shortest decimal that reads back as the same float32 (0.1, not
    0.10000000149011612), as stock writes the float fields of its results."""
    return float(str(np.float32(value)))


def classification_result_to_json(result: classification_pb2.ClassificationResult) -> Any:
    """The REST body of a classify response: `{"results": [[[label, score], ...], ...]}`."""
    if not result.classifications:
        raise invalid_argument("Cannot convert empty ClassificationResults to JSON")
    return {
        "results": [
            [[c.label, _float32_json(c.score)] for c in classifications.classes]
            for classifications in result.classifications
        ]
    }


def regression_result_to_json(result: regression_pb2.RegressionResult) -> Any:
    """The REST body of a regress response: `{"results": [value, ...]}`."""
    if not result.regressions:
        raise invalid_argument("Cannot convert empty RegressionResults to JSON")
    return {"results": [_float32_json(r.value) for r in result.regressions]}


def model_metadata_to_json(response: get_model_metadata_pb2.GetModelMetadataResponse) -> Any:
    """The REST body of a metadata response: the model spec and its `signature_def` map."""
    signature_def_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata[SIGNATURE_DEF_FIELD].Unpack(signature_def_map)
    return {
        "model_spec": message_to_json(response.model_spec),
        "metadata": {SIGNATURE_DEF_FIELD: message_to_json(signature_def_map)},
    }
