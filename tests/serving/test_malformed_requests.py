"""Evidence: a stream of malformed requests over gRPC and REST, each answered with the stock
server's status code (and its message, or the stable part of it), interleaved with valid requests
that keep getting correct answers. One server: translator + calculator from a ModelServerConfig,
batching on (max_batch_size 8), a 64 KiB gRPC message limit and the REST API."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections import Counter

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from keras_attn.serving.config import BatchingOptions
from keras_attn.serving.server import ModelServer

from .conftest import LATEST_VERSION

TIMEOUT = 20
ROUNDS = 36
MAX_MESSAGE = 64 * 1024
INVALID = grpc.StatusCode.INVALID_ARGUMENT
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_base_path, calculator_base_path):
    config = tmp_path_factory.mktemp("malformed") / "models.config"
    config.write_text(
        f"""
model_config_list {{
  config {{ name: "translator" base_path: "{model_base_path}" model_platform: "tensorflow" }}
  config {{ name: "calculator" base_path: "{calculator_base_path}" model_platform: "tensorflow" }}
}}
"""
    )
    model_server = ModelServer(
        model_config_file=str(config),
        port=0,
        rest_api_port=0,
        enable_batching=True,
        batching=BatchingOptions(max_batch_size=8, num_batch_threads=2),
        grpc_channel_arguments=f"grpc.max_receive_message_length={MAX_MESSAGE}",
        file_system_poll_wait_seconds=0,
    ).start()
    yield model_server
    model_server.stop(grace=1.0)


@pytest.fixture(scope="module")
def stub(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


# ---------------------------------------------------------------------- gRPC requests


def predict(texts=("a b",), name="translator", signature="", key="text", dtype=tf.string):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    request.inputs[key].CopyFrom(tf.make_tensor_proto(list(texts), dtype=dtype))
    return request


def with_spec(request, **fields):
    if "version" in fields:
        request.model_spec.version.value = fields["version"]
    if "label" in fields:
        request.model_spec.version_label = fields["label"]
    return request


def no_spec():
    request = predict()
    request.ClearField("model_spec")
    return request


def extra_key():
    request = predict()
    request.inputs["zzz"].CopyFrom(tf.make_tensor_proto(["x"]))
    return request


def bad_content():
    request = predict()
    proto = tf.make_tensor_proto(np.array([1.0, 2.0], np.float32))
    proto.tensor_content = proto.tensor_content[:-1]
    request.inputs["text"].CopyFrom(proto)
    return request


def unknown_output():
    request = predict()
    request.output_filter.append("nope")
    return request


def predict_proto(proto):
    request = predict()
    request.inputs["text"].CopyFrom(proto)
    return request


def string_bomb(dims, value=None):
    """A DT_STRING proto declaring `dims`, carrying `value` once (or nothing)."""
    proto = tf.make_tensor_proto([value] if value is not None else [], dtype=tf.string)
    del proto.tensor_shape.dim[:]
    for size in dims:
        proto.tensor_shape.dim.add(size=size)
    return proto


def float_bomb(dims):
    proto = tf.make_tensor_proto(np.ones([1], np.float32))
    proto.ClearField("tensor_content")
    proto.float_val.append(1.0)
    proto.tensor_shape.dim[0].size = dims[0]
    return proto


def metadata_field():
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["nope"])
    request.model_spec.name = "translator"
    return request


def classify_translator():
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "translator"
    request.input.example_list.examples.add()
    return request


# (category, method, request factory, code, message start)
GRPC_CASES = [
    ("unknown model", "Predict", lambda: predict(name="nope"), grpc.StatusCode.NOT_FOUND,
     "Servable not found for request: Latest(nope)"),
    ("unknown version", "Predict", lambda: with_spec(predict(), version=42),
     grpc.StatusCode.NOT_FOUND, "Servable not found for request: Specific(translator, 42)"),
    ("unknown label", "Predict", lambda: with_spec(predict(), label="beta"), INVALID,
     "Unrecognized servable version label: beta"),
    ("unknown signature", "Predict", lambda: predict(signature="nope"),
     grpc.StatusCode.FAILED_PRECONDITION, 'Serving signature key "nope" not found.'),
    ("missing model_spec", "Predict", no_spec, INVALID, "Missing ModelSpec"),
    ("empty model name", "Predict", lambda: predict(name=""), INVALID,
     "ModelSpec has no name specified."),
    ("wrong key", "Predict", lambda: predict(key="txt"), INVALID,
     "Signature input alias: text(feed name: serving_default_text:0) not found in request"),
    ("extra key", "Predict", extra_key, INVALID, "input size does not match signature: 2!=1"),
    ("wrong dtype", "Predict", lambda: predict([1.5], dtype=tf.float32), INVALID,
     "Expects arg[0] to be string but float is provided"),
    ("wrong rank", "Predict", lambda: predict([["a", "b"]]), INVALID,
     "Input tensor alias: text has shape [1,2] but signature serving_default expects shape [-1]"),
    ("unparsable tensor", "Predict", bad_content, INVALID, "tensor parsing error: text"),
    ("empty string", "Predict", lambda: predict([""], name="calculator"), INVALID,
     "StringToNumberOp could not correctly convert string: "),
    ("invalid UTF-8", "Predict", lambda: predict([b"\xff\xfe"], name="calculator"), INVALID,
     "StringToNumberOp could not correctly convert string: "),
    ("oversize", "Predict", lambda: predict(["x" * (MAX_MESSAGE + 1)]),
     grpc.StatusCode.RESOURCE_EXHAUSTED, ""),
    ("batch over max_batch_size", "Predict", lambda: predict(["a"] * 9), INVALID,
     "Task size 9 is larger than maximum input batch size 8"),
    ("unknown output", "Predict", unknown_output, INVALID,
     "output tensor alias not found in signature: nope"),
    ("wrong method", "Classify", classify_translator, INVALID, "Expected one or two output"),
    ("unsupported metadata field", "GetModelMetadata", metadata_field, INVALID,
     "Metadata field %s is not supportednope"),
    ("rows bomb", "Predict", lambda: predict_proto(string_bomb([10_000_000])), EXHAUSTED,
     "Input tensor alias: text has 10000000 rows, more than the server's limit of 1024 per "
     "request (--max_rows_per_request)"),
    ("fill bomb", "Predict", lambda: predict_proto(string_bomb([30], "x" * 50_000)), EXHAUSTED,
     "Input tensor alias: text declares shape [30] (30 elements) but carries 1 values; filling "
     "the rest would take 1450928 bytes, more than the server's limit of 1048576"),
    ("dtype bomb", "Predict", lambda: predict_proto(float_bomb([10**9])), INVALID,
     "Expects arg[0] to be string but float is provided"),
]  # fmt: skip


# ---------------------------------------------------------------------- REST requests


def instances(values, **extra):
    return json.dumps({"instances": values, **extra}).encode()


P = "/v1/models/translator:predict"

# (category, method, path, body, HTTP status, error start)
REST_CASES = [
    ("unknown model", "POST", "/v1/models/nope:predict", instances(["a"]), 404,
     "Servable not found for request: Latest(nope)"),
    ("unknown version", "POST", "/v1/models/translator/versions/42:predict", instances(["a"]),
     404, "Servable not found for request: Specific(translator, 42)"),
    ("unknown label", "POST", "/v1/models/translator/labels/beta:predict", instances(["a"]), 400,
     "Unrecognized servable version label: beta"),
    ("unknown signature", "POST", P, instances(["a"], signature_name="nope"), 400,
     'Serving signature name: "nope" not found in signature def'),
    ("unknown model status", "GET", "/v1/models/nope", b"", 404,
     "Could not find any versions of model nope"),
    ("wrong key", "POST", P, json.dumps({"inputs": {"txt": ["a"]}}).encode(), 400,
     "Missing named input: text in 'inputs' object."),
    ("wrong dtype", "POST", P, instances([1]), 400,
     "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: 1 "
     "Type: Number is not of expected type: string"),
    ("wrong rank", "POST", P, instances([["a", "b"]]), 400,
     "Input tensor alias: text has shape [1,2] but signature serving_default expects shape [-1]"),
    ("ragged instances", "POST", P, instances([["a"], ["b", "c"]]), 400,
     "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: Expecting "
     "tensor size: 1 but got: 2"),
    ("empty batch", "POST", P, instances([]), 400, "JSON Value: {"),
    ("empty body", "POST", P, b"", 400, "JSON Parse error: The document is empty"),
    ("invalid JSON", "POST", P, b'{"instances": [', 400, "JSON Parse error: "),
    ("invalid UTF-8", "POST", P, b'{"instances": ["\xff"]}', 400, "JSON Parse error: "),
    ("lone surrogate", "POST", P, b'{"instances": ["\\udcff"]}', 400,
     "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Parse "
     "error: The surrogate pair in string is invalid."),
    ("bad base64", "POST", P, instances([{"b64": "%%%"}]), 400,
     "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: Unable to "
     "base64 decode"),
    ("missing instances", "POST", P, b"{}", 400, "Missing 'inputs' or 'instances' key"),
    ("both instances and inputs", "POST", P, json.dumps({"instances": ["a"], "inputs": ["a"]})
     .encode(), 400, "JSON Value: {"),
    ("batch over max_batch_size", "POST", P, instances(["a"] * 9), 400,
     "Task size 9 is larger than maximum input batch size 8"),
    ("empty string", "POST", "/v1/models/calculator:predict", instances([""]), 400,
     "StringToNumberOp could not correctly convert string: "),
    ("wrong method", "PUT", P, instances(["a"]), 400, "Malformed request: PUT " + P),
    ("GET on predict", "GET", P, b"", 400, "Malformed request: GET " + P),
    ("nested 10,000 deep", "POST", P, b'{"instances": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
     400, "JSON Parse error: The document is nested more than 64 levels deep (--max_json_depth)"),
    ("5000-digit number", "POST", P, b'{"instances": [' + b"7" * 5000 + b"]}", 400,
     "JSON Parse error: Number too big to be stored in double."),
    ("version beyond int64", "POST", "/v1/models/translator/versions/99999999999999999999:predict",
     instances(["a"]), 400, "Failed to convert version: 99999999999999999999 to numeric."),
    ("rows over the limit", "POST", P, instances(["a"] * 1025), 429,
     "Input tensor alias: text has 1025 rows, more than the server's limit of 1024 per request"),
]  # fmt: skip


def rest(server, method, path, body):
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.rest_api_port}{path}", data=body or None, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


# ---------------------------------------------------------------------- the stream


def valid_requests(server, stub, round_index):
    """A valid gRPC and a valid REST request (with b64 bytes), checked against known answers."""
    texts = [f"w{round_index} x{round_index} y", "", "one"]
    response = stub.Predict(predict(texts), timeout=TIMEOUT)
    assert tf.make_ndarray(response.outputs["translation"]).tolist() == [
        f"y x{round_index} w{round_index}".encode(),
        b"",
        b"one",
    ]
    assert response.model_spec.version.value == LATEST_VERSION
    # An empty batch is no error for the model: stock answers OK with empty outputs.
    empty = stub.Predict(predict([]), timeout=TIMEOUT)
    assert tf.make_ndarray(empty.outputs["translation"]).shape == (0,)
    encoded = base64.b64encode(f"b64 {round_index}".encode()).decode()
    status, body = rest(server, "POST", P, instances([{"b64": encoded}, "p q"]))
    assert status == 200
    assert [row["translation"] for row in body["predictions"]] == [f"{round_index} b64", "q p"]


def test_malformed_requests_get_stock_codes_and_valid_ones_keep_working(server, stub):
    categories = {f"gRPC {case[0]}" for case in GRPC_CASES} | {
        f"REST {case[0]}" for case in REST_CASES
    }
    assert len(categories) >= 12
    answered: Counter = Counter()
    for round_index in range(ROUNDS):
        valid_requests(server, stub, round_index)
        for category, method, make_request, code, message in GRPC_CASES:
            with pytest.raises(grpc.RpcError) as error:
                getattr(stub, method)(make_request(), timeout=TIMEOUT)
            assert error.value.code() == code, (category, error.value.details())
            # Model run-time errors carry TensorFlow's `{{function_node ...}}` prefix.
            assert message in error.value.details(), (category, error.value.details())
            answered[f"gRPC {category}"] += 1
        valid_requests(server, stub, round_index)
        for category, method, path, body, status, message in REST_CASES:
            got_status, got_body = rest(server, method, path, body)
            assert got_status == status, (category, got_body)
            assert set(got_body) == {"error"}, (category, got_body)
            assert message in got_body["error"], (category, got_body)
            answered[f"REST {category}"] += 1
    assert sum(answered.values()) >= 1000
    assert set(answered) == categories
    # The metrics saw every gRPC/REST predict error with its code; names the server does not
    # serve are counted under one label.
    assert server.metrics.count("<unknown>", "NOT_FOUND") == 2 * ROUNDS
    assert server.metrics.count("nope", "NOT_FOUND") == 0
