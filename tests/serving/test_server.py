"""The local server against TensorFlow Serving's official stubs: outputs, metadata, status, health,
reflection, REST, graceful stop, and the stock status code and message for every error."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from tensorflow.core.example import example_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_management_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from keras_attn.serving.core import ServingCore, session_message
from keras_attn.serving.servable import load_servable
from keras_attn.serving.server import ModelServer, PredictionServicer

from .conftest import LATEST_VERSION, MODEL_NAME

TEXTS = ["the small cat", "hello world", ""]
TIMEOUT = 20


def predict_request(texts=TEXTS, signature_name="", name=MODEL_NAME) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature_name
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(texts, dtype=tf.string))
    return request


def assert_answers(prediction_stub) -> None:
    """The server still answers a good request correctly."""
    response = prediction_stub.Predict(predict_request(["one two"]), timeout=TIMEOUT)
    assert tf.make_ndarray(response.outputs["translation"]).tolist() == [b"two one"]


def rpc_error(call, request) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=TIMEOUT)
    return info.value


# ---------------------------------------------------------------------- Predict


@pytest.mark.parametrize("signature", ["serving_default", "translate", "translate_with_alignment"])
def test_predict_equals_the_saved_model(prediction_stub, reference, signature):
    response = prediction_stub.Predict(predict_request(signature_name=signature), timeout=TIMEOUT)

    expected = reference.signatures[signature](text=tf.constant(TEXTS))
    assert sorted(response.outputs) == sorted(expected)
    for key, tensor in expected.items():
        np.testing.assert_array_equal(tf.make_ndarray(response.outputs[key]), tensor.numpy())
    assert tf.make_ndarray(response.outputs["translation"]).tolist() == [
        b"cat small the",
        b"world hello",
        b"",
    ]
    # Stock serializes outputs with Tensor::AsProtoField: typed *_val fields, no tensor_content.
    assert response.outputs["scores"].float_val == [3.0, 2.0, 0.0]
    assert not response.outputs["scores"].tensor_content
    assert response.model_spec.name == MODEL_NAME
    assert response.model_spec.version.value == LATEST_VERSION
    assert response.model_spec.signature_name == signature


def test_predict_fills_in_the_default_signature_name(prediction_stub):
    response = prediction_stub.Predict(predict_request(signature_name=""), timeout=TIMEOUT)
    assert response.model_spec.signature_name == "serving_default"


def test_predict_honours_the_output_filter(prediction_stub):
    request = predict_request(signature_name="translate_with_alignment")
    request.output_filter.extend(["scores", "alignment"])
    response = prediction_stub.Predict(request, timeout=TIMEOUT)
    assert sorted(response.outputs) == ["alignment", "scores"]
    assert tf.make_ndarray(response.outputs["alignment"]).shape == (3, 3, 3)


def test_predict_a_specific_version(prediction_stub):
    request = predict_request()
    request.model_spec.version.value = LATEST_VERSION
    response = prediction_stub.Predict(request, timeout=TIMEOUT)
    assert response.model_spec.version.value == LATEST_VERSION


def _no_spec():
    request = predict_request()
    request.ClearField("model_spec")
    return request


def _with(request, **changes):
    for key, value in changes.items():
        if key == "version":
            request.model_spec.version.value = value
        elif key == "version_label":
            request.model_spec.version_label = value
        elif key == "drop_input":
            del request.inputs[value]
        elif key == "add_input":
            request.inputs[value].CopyFrom(tf.make_tensor_proto(["x"], dtype=tf.string))
        elif key == "input":
            request.inputs["text"].CopyFrom(value)
        elif key == "output_filter":
            request.output_filter.extend(value)
    return request


def _rename_input(request):
    request.inputs["txt"].CopyFrom(request.inputs["text"])
    del request.inputs["text"]
    return request


def _bad_content():
    proto = tf.make_tensor_proto(np.array([1.0, 2.0], np.float32))
    proto.tensor_content = proto.tensor_content[:-1]
    return proto


PREDICT_ERRORS = [
    (
        "unknown model",
        lambda: predict_request(name="nope"),
        grpc.StatusCode.NOT_FOUND,
        "Servable not found for request: Latest(nope)",
    ),
    (
        "unknown version",
        lambda: _with(predict_request(), version=42),
        grpc.StatusCode.NOT_FOUND,
        "Servable not found for request: Specific(translator, 42)",
    ),
    (
        "older version on disk (only the latest is loaded)",
        lambda: _with(predict_request(), version=1),
        grpc.StatusCode.NOT_FOUND,
        "Servable not found for request: Specific(translator, 1)",
    ),
    (
        "unknown version label",
        lambda: _with(predict_request(), version_label="stable"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Unrecognized servable version label: stable",
    ),
    (
        "empty model name",
        lambda: predict_request(name="", signature_name="serving_default"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ModelSpec has no name specified.",
    ),
    ("no model spec", _no_spec, grpc.StatusCode.INVALID_ARGUMENT, "Missing ModelSpec"),
    (
        "unknown signature",
        lambda: predict_request(signature_name="nope"),
        grpc.StatusCode.FAILED_PRECONDITION,
        'Serving signature key "nope" not found.',
    ),
    (
        "missing input key",
        lambda: _with(predict_request(), drop_input="text"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "input size does not match signature: 0!=1 len({}) != len({text}). Sent extra: {}. "
        "Missing but required: {text}.",
    ),
    (
        "extra input key",
        lambda: _with(predict_request(), add_input="zzz"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "input size does not match signature: 2!=1 len({text,zzz}) != len({text}). "
        "Sent extra: {zzz}. Missing but required: {}.",
    ),
    (
        "misspelled input key",
        lambda: _rename_input(predict_request()),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Signature input alias: text(feed name: serving_default_text:0) not found in request "
        "and no default value provided. Inputs expected to be in the request {txt}, or default "
        "input alias set: ",
    ),
    (
        "wrong dtype",
        lambda: _with(predict_request(), input=tf.make_tensor_proto([1.0, 2.0], dtype=tf.float32)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Expects arg[0] to be string but float is provided",
    ),
    (
        "wrong rank",
        lambda: _with(predict_request(), input=tf.make_tensor_proto([["a", "b"]], dtype=tf.string)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Input tensor alias: text has shape [1,2] but signature serving_default expects shape [-1]",
    ),
    (
        "unparsable tensor",
        lambda: _with(predict_request(), input=_bad_content()),
        grpc.StatusCode.INVALID_ARGUMENT,
        "tensor parsing error: text",
    ),
    (
        "unknown output in the filter",
        lambda: _with(predict_request(), output_filter=["nope"]),
        grpc.StatusCode.INVALID_ARGUMENT,
        "output tensor alias not found in signature: nope Outputs expected to be in the set "
        "{scores,tokens,translation}.",
    ),
    (
        "duplicate output in the filter",
        lambda: _with(predict_request(), output_filter=["scores", "scores"]),
        grpc.StatusCode.INVALID_ARGUMENT,
        "duplicate output tensor alias: scores",
    ),
]


@pytest.mark.parametrize(
    "make_request, code, message",
    [case[1:] for case in PREDICT_ERRORS],
    ids=[case[0] for case in PREDICT_ERRORS],
)
def test_predict_errors_match_the_stock_server(prediction_stub, make_request, code, message):
    error = rpc_error(prediction_stub.Predict, make_request())
    assert (error.code(), error.details()) == (code, message)
    assert_answers(prediction_stub)


# ---------------------------------------------------------------------- Classify / Regress


def _examples(*values: float):
    examples = []
    for value in values:
        example = example_pb2.Example()
        example.features.feature["x"].float_list.value.append(value)
        examples.append(example)
    return examples


def classification_request(name=MODEL_NAME, signature_name=""):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature_name
    request.input.example_list.examples.extend(_examples(0.0))
    return request


def regression_request(name=MODEL_NAME, signature_name=""):
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature_name
    request.input.example_list.examples.extend(_examples(0.0))
    return request


def multi_inference_request(method, name=MODEL_NAME, signature_name=""):
    request = inference_pb2.MultiInferenceRequest()
    task = request.tasks.add(method_name=method)
    task.model_spec.name = name
    task.model_spec.signature_name = signature_name
    request.input.example_list.examples.extend(_examples(0.0))
    return request


CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"
INFERENCE_ERRORS = [
    (
        "classify on a predict signature",
        "Classify",
        lambda: classification_request(),
        "Expected one or two output Tensors, found 3",
    ),
    (
        "classify on a missing signature",
        "Classify",
        lambda: classification_request(signature_name="nope"),
        "No signature was found with the name: nope",
    ),
    (
        "regress on a predict signature",
        "Regress",
        lambda: regression_request(signature_name="translate_with_alignment"),
        "Expected one output Tensor.",
    ),
    (
        "multi-inference classify task on a predict signature",
        "MultiInference",
        lambda: multi_inference_request(CLASSIFY),
        "Expected one or two output Tensors, found 3",
    ),
    (
        "multi-inference task on a missing signature",
        "MultiInference",
        lambda: multi_inference_request(REGRESS, signature_name="nope"),
        "Requested signature not found in model graph: nope",
    ),
]


@pytest.mark.parametrize(
    "method, make_request, message",
    [case[1:] for case in INFERENCE_ERRORS],
    ids=[case[0] for case in INFERENCE_ERRORS],
)
def test_classify_and_regress_on_predict_signatures_fail_as_stock(
    prediction_stub, method, make_request, message
):
    error = rpc_error(getattr(prediction_stub, method), make_request())
    assert (error.code(), error.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
    assert_answers(prediction_stub)


def test_multi_inference_with_a_predict_method_is_unimplemented(prediction_stub):
    error = rpc_error(
        prediction_stub.MultiInference, multi_inference_request("tensorflow/serving/predict")
    )
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED
    assert error.details() == "Unsupported signature method_name: tensorflow/serving/predict"


def test_classify_regress_and_multi_inference_run_a_generic_model(calculator_stub):
    request = classification_request(name="calculator", signature_name="classify")
    request.input.example_list.ClearField("examples")
    request.input.example_list.examples.extend(_examples(0.0, 2.0))
    response = calculator_stub.Classify(request, timeout=TIMEOUT)
    assert response.model_spec.version.value == 7
    first, second = response.result.classifications
    assert [c.label for c in first.classes] == ["neg", "pos"]
    assert [c.score for c in first.classes] == pytest.approx([0.5, 0.5])
    assert second.classes[1].score == pytest.approx(1 / (1 + np.exp(-2.0)))

    request = regression_request(name="calculator", signature_name="regress")
    request.input.example_list.ClearField("examples")
    request.input.example_list.examples.extend(_examples(1.5, -4.0))
    response = calculator_stub.Regress(request, timeout=TIMEOUT)
    assert [r.value for r in response.result.regressions] == [3.0, -8.0]

    request = multi_inference_request(REGRESS, name="calculator", signature_name="regress")
    response = calculator_stub.MultiInference(request, timeout=TIMEOUT)
    (regression,) = response.results
    assert regression.model_spec.signature_name == "regress"
    assert regression.model_spec.version.value == 7
    assert [r.value for r in regression.regression_result.regressions] == [0.0]

    # Each TF2 signature has its own input placeholder, so (as in stock) tasks on two signatures
    # cannot share one input tensor.
    task = request.tasks.add(method_name=CLASSIFY)
    task.model_spec.name = "calculator"
    task.model_spec.signature_name = "classify"
    error = rpc_error(calculator_stub.MultiInference, request)
    assert (error.code(), error.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Input tensor must be the same for all Signatures.",
    )

    empty = classification_request(name="calculator", signature_name="classify")
    empty.input.example_list.ClearField("examples")
    error = rpc_error(calculator_stub.Classify, empty)
    assert (error.code(), error.details()) == (grpc.StatusCode.INVALID_ARGUMENT, "Input is empty.")


def test_a_run_time_error_becomes_its_status_and_the_server_keeps_answering(calculator_stub):
    request = predict_request(["1.5", "oops"], name="calculator")
    error = rpc_error(calculator_stub.Predict, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "oops" in error.details()

    response = calculator_stub.Predict(
        predict_request(["1.5", "-2"], name="calculator"), timeout=TIMEOUT
    )
    assert tf.make_ndarray(response.outputs["value"]).tolist() == [1.5, -2.0]


# ---------------------------------------------------------------------- metadata and status


def metadata_request(name=MODEL_NAME, fields=("signature_def",)):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=list(fields))
    request.model_spec.name = name
    return request


def test_metadata_is_the_saved_signature_def_map(prediction_stub, latest_path):
    response = prediction_stub.GetModelMetadata(metadata_request(), timeout=TIMEOUT)

    assert response.model_spec.name == MODEL_NAME
    assert response.model_spec.version.value == LATEST_VERSION
    assert list(response.metadata) == ["signature_def"]
    any_message = response.metadata["signature_def"]
    assert any_message.type_url == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    received = get_model_metadata_pb2.SignatureDefMap()
    assert any_message.Unpack(received)

    saved_model = saved_model_pb2.SavedModel()
    with open(f"{latest_path}/saved_model.pb", "rb") as f:
        saved_model.ParseFromString(f.read())
    expected = get_model_metadata_pb2.SignatureDefMap()
    for key, signature in saved_model.meta_graphs[0].signature_def.items():
        expected.signature_def[key].CopyFrom(signature)
    assert received == expected

    alignment = received.signature_def["translate_with_alignment"]
    assert alignment.method_name == "tensorflow/serving/predict"
    assert alignment.inputs["text"].dtype == tf.string.as_datatype_enum
    assert [d.size for d in alignment.inputs["text"].tensor_shape.dim] == [-1]
    assert [d.size for d in alignment.outputs["alignment"].tensor_shape.dim] == [-1, -1, -1]
    assert alignment.outputs["scores"].dtype == tf.float32.as_datatype_enum


METADATA_ERRORS = [
    (
        "unsupported metadata field",
        lambda: metadata_request(fields=("signature_def", "foo")),
        grpc.StatusCode.INVALID_ARGUMENT,
        # Stock concatenates instead of formatting here, literally.
        "Metadata field %s is not supportedfoo",
    ),
    (
        "no metadata field",
        lambda: metadata_request(fields=()),
        grpc.StatusCode.INVALID_ARGUMENT,
        "GetModelMetadataRequest must specify at least one metadata_field",
    ),
    (
        "unknown model",
        lambda: metadata_request(name="nope"),
        grpc.StatusCode.NOT_FOUND,
        "Servable not found for request: Latest(nope)",
    ),
    (
        "empty model name",
        lambda: metadata_request(name=""),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ModelSpec has no name specified.",
    ),
]


@pytest.mark.parametrize(
    "make_request, code, message",
    [case[1:] for case in METADATA_ERRORS],
    ids=[case[0] for case in METADATA_ERRORS],
)
def test_metadata_errors_match_the_stock_server(prediction_stub, make_request, code, message):
    error = rpc_error(prediction_stub.GetModelMetadata, make_request())
    assert (error.code(), error.details()) == (code, message)
    assert_answers(prediction_stub)


def status_request(name=MODEL_NAME, version=None):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    if version is not None:
        request.model_spec.version.value = version
    return request


@pytest.mark.parametrize("version", [None, LATEST_VERSION])
def test_model_status_is_available(model_stub, version):
    response = model_stub.GetModelStatus(status_request(version=version), timeout=TIMEOUT)
    (status,) = response.model_version_status
    assert status.version == LATEST_VERSION
    assert status.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    assert status.HasField("status")
    assert (status.status.error_code, status.status.error_message) == (0, "")


@pytest.mark.parametrize(
    "name, version, message",
    [
        ("nope", None, "Could not find any versions of model nope"),
        (MODEL_NAME, 42, "Could not find version 42 of model translator"),
    ],
)
def test_model_status_not_found(model_stub, prediction_stub, name, version, message):
    error = rpc_error(model_stub.GetModelStatus, status_request(name, version))
    assert (error.code(), error.details()) == (grpc.StatusCode.NOT_FOUND, message)
    assert_answers(prediction_stub)


def test_reload_config_without_a_model_config_list_is_refused(model_stub, prediction_stub):
    error = rpc_error(
        model_stub.HandleReloadConfigRequest, model_management_pb2.ReloadConfigRequest()
    )
    assert (error.code(), error.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "ServerModelConfig type not supported by HandleReloadConfigRequest. Only "
        "ModelConfigList is currently supported",
    )
    assert_answers(prediction_stub)


# ---------------------------------------------------------------------- health and reflection


@pytest.mark.parametrize("service", ["", "tensorflow.serving.PredictionService"])
def test_health_is_serving(channel, service):
    stub = health_pb2_grpc.HealthStub(channel)
    response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT)
    assert response.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_the_services(channel):
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    (response,) = list(stub.ServerReflectionInfo(iter([request]), timeout=TIMEOUT))
    names = {service.name for service in response.list_services_response.service}
    assert {
        "tensorflow.serving.PredictionService",
        "tensorflow.serving.ModelService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= names


# ---------------------------------------------------------------------- REST


def rest(server, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{server.rest_api_port}{path}", data=data)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_rest_status_and_metadata(server):
    status, body = rest(server, f"/v1/models/{MODEL_NAME}")
    assert status == 200
    assert body == {
        "model_version_status": [
            {
                "version": str(LATEST_VERSION),
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
        ]
    }
    status, body = rest(server, f"/v1/models/{MODEL_NAME}/versions/{LATEST_VERSION}/metadata")
    assert status == 200
    assert body["model_spec"]["name"] == MODEL_NAME
    assert body["model_spec"]["version"] == str(LATEST_VERSION)
    signature = body["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert signature["inputs"]["text"]["dtype"] == "DT_STRING"
    assert signature["method_name"] == "tensorflow/serving/predict"


def test_rest_predict_row_and_columnar(server):
    status, body = rest(server, f"/v1/models/{MODEL_NAME}:predict", {"instances": ["a b c", "d"]})
    assert status == 200
    assert body["predictions"] == [
        {"translation": "c b a", "tokens": ["c", "b", "a"], "scores": 3.0},
        {"translation": "d", "tokens": ["d", "", ""], "scores": 1.0},
    ]
    status, body = rest(
        server,
        f"/v1/models/{MODEL_NAME}:predict",
        {"signature_name": "translate", "inputs": {"text": ["a b", "c"]}},
    )
    assert status == 200
    assert body["outputs"] == {
        "translation": ["b a", "c"],
        "tokens": [["b", "a"], ["c", ""]],
        "scores": [2.0, 1.0],
    }


@pytest.mark.parametrize(
    "path, body, code, error",
    [
        ("/v1/models/nope", None, 404, "Could not find any versions of model nope"),
        (
            "/v1/models/nope:predict",
            {"instances": ["a"]},
            404,
            "Servable not found for request: Latest(nope)",
        ),
        (
            f"/v1/models/{MODEL_NAME}:predict",
            {"signature_name": "nope", "instances": ["a"]},
            400,
            'Serving signature name: "nope" not found in signature def',
        ),
        (
            f"/v1/models/{MODEL_NAME}:predict",
            {"instances": [1]},
            400,
            "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
            "JSON Value: 1 Type: Number is not of expected type: string",
        ),
        (f"/v1/models/{MODEL_NAME}:predict", {}, 400, "Missing 'inputs' or 'instances' key"),
        (
            f"/v1/models/{MODEL_NAME}",
            {"x": 1},
            400,
            f"Malformed request: POST /v1/models/{MODEL_NAME}",
        ),
    ],
)
def test_rest_errors(server, path, body, code, error):
    assert rest(server, path, body) == (code, {"error": error})
    assert rest(server, f"/v1/models/{MODEL_NAME}:predict", {"instances": ["x y"]})[0] == 200


# ---------------------------------------------------------------------- graceful stop


class _WatchedFunctions:
    """Signature functions that count in `entered` the runs begun (to know a call is in flight),
    and pass `close()` on, so a stop still cancels their runs."""

    def __init__(self, functions):
        self._functions = functions
        self.entered = threading.Semaphore(0)

    def get(self, key):
        function = self._functions.get(key)
        if function is None:
            return None

        def watched(**kwargs):
            self.entered.release()
            self._before_run()
            return function(**kwargs)

        return watched

    def _before_run(self) -> None:
        pass

    def close(self) -> None:
        self._functions.close()


class _BlockingFunctions(_WatchedFunctions):
    """Signature functions that wait for `release` before running (to hold a call in flight)."""

    def __init__(self, functions):
        super().__init__(functions)
        self.release = threading.Event()

    def _before_run(self) -> None:
        assert self.release.wait(TIMEOUT)


# A stopping grpcio server cancels calls that arrive during the grace period; once it has
# closed its port, the client reports UNAVAILABLE.
REFUSED = (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)


def _wait_until_refused(health) -> None:
    """Polls with health checks (which never block) until the server refuses new calls."""
    for _ in range(200):
        try:
            health.Check(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT)
        except grpc.RpcError as error:
            assert error.code() in REFUSED, error
            return
        time.sleep(0.05)
    raise AssertionError("the server kept accepting calls after stop()")


def test_stop_finishes_in_flight_calls_and_refuses_new_ones(model_base_path):
    servable = load_servable(MODEL_NAME, model_base_path)
    functions = _BlockingFunctions(servable.functions)
    model_server = ModelServer(
        MODEL_NAME,
        model_base_path,
        port=0,
        servable=dataclasses.replace(servable, functions=functions),
    ).start()
    with grpc.insecure_channel(f"127.0.0.1:{model_server.port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        health = health_pb2_grpc.HealthStub(channel)
        watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING

        in_flight = stub.Predict.future(predict_request(["a b"]), timeout=TIMEOUT)
        assert functions.entered.acquire(timeout=TIMEOUT)
        stopper = threading.Thread(target=model_server.stop, kwargs={"grace": TIMEOUT})
        stopper.start()

        assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
        _wait_until_refused(health)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Predict(predict_request(["c"]), timeout=TIMEOUT)
        assert refused.value.code() in REFUSED

        functions.release.set()
        response = in_flight.result(timeout=TIMEOUT)
        assert tf.make_ndarray(response.outputs["translation"]).tolist() == [b"b a"]
        watch.cancel()
        stopper.join(TIMEOUT)
        assert not stopper.is_alive()
    assert model_server.wait_for_termination(0)


def test_stop_waits_until_the_answers_computed_are_sent(monkeypatch, model_base_path):
    """A call stays in flight until its answer is sent, not only until the model has run: a
    worker thread held between the two (as on a loaded machine) still gets its answer out."""
    computed, send = threading.Event(), threading.Event()
    predict = PredictionServicer.Predict

    def held(self, request, context):
        response = predict(self, request, context)
        computed.set()
        assert send.wait(TIMEOUT)
        return response

    monkeypatch.setattr(PredictionServicer, "Predict", held)
    model_server = ModelServer(MODEL_NAME, model_base_path, port=0).start()
    with grpc.insecure_channel(f"127.0.0.1:{model_server.port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        in_flight = stub.Predict.future(predict_request(["a b"]), timeout=TIMEOUT)
        assert computed.wait(TIMEOUT)
        stopper = threading.Thread(target=model_server.stop, kwargs={"grace": TIMEOUT})
        stopper.start()
        _wait_until_refused(health_pb2_grpc.HealthStub(channel))

        send.set()
        response = in_flight.result(timeout=TIMEOUT)
        assert tf.make_ndarray(response.outputs["translation"]).tolist() == [b"b a"]
        stopper.join(TIMEOUT)
        assert not stopper.is_alive()
    assert model_server.wait_for_termination(0)


def test_session_errors_are_worded_as_session_run():
    eager = (
        "Graph execution error:\n\nDetected at node StringToNumber defined at (most recent call "
        "last):\n<stack traces unavailable>\nStringToNumberOp could not correctly convert "
        "string: x\n\t [[{{node StringToNumber}}]] [Op:__inference_signature_wrapper_parse_7]"
    )
    assert session_message(eager) == (
        "StringToNumberOp could not correctly convert string: x\n\t [[{{node StringToNumber}}]]"
    )
    assert session_message("plain message") == "plain message"


def test_stop_cancels_runs_that_outlive_the_grace_period(spinner_base_path):
    servable = load_servable("spinner", spinner_base_path)
    functions = _WatchedFunctions(servable.functions)
    model_server = ModelServer(
        "spinner",
        spinner_base_path,
        port=0,
        rest_api_port=0,
        servable=dataclasses.replace(servable, functions=functions),
    ).start()
    with grpc.insecure_channel(f"127.0.0.1:{model_server.port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        request = predict_request(["1000000000"], name="spinner")  # hours, unless cancelled
        endless = stub.Predict.future(request, timeout=120)
        rest = threading.Thread(
            target=lambda: _rest_post(model_server.rest_api_port, "spinner", "1000000000")
        )
        rest.start()
        for _ in range(2):  # the gRPC and the REST run have both begun
            assert functions.entered.acquire(timeout=TIMEOUT)
        started = time.monotonic()
        model_server.stop(grace=1.0)
        assert time.monotonic() - started < 1.0 + 4.0
        with pytest.raises(grpc.RpcError):
            endless.result(timeout=5)
        rest.join(5)
        assert not rest.is_alive()
    assert model_server.wait_for_termination(0)


def _rest_post(port, name, text):
    url = f"http://127.0.0.1:{port}/v1/models/{name}:predict"
    try:
        urllib.request.urlopen(url, json.dumps({"instances": [text]}).encode(), timeout=60)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        pass  # cut by the stop


def test_metric_labels_name_only_what_is_served(server):
    core = ServingCore(server.manager)
    assert core.metric_labels(MODEL_NAME, "translate") == (MODEL_NAME, "translate")
    assert core.metric_labels(MODEL_NAME, "x" * 1000) == (MODEL_NAME, "<unknown>")
    assert core.metric_labels("y" * 1000, "translate") == ("<unknown>", "<unknown>")
