"""Request size limits (the stock gRPC message cap and the server's own caps on rows, strings,
filling, bodies and JSON nesting), deadlines, Prometheus metrics and warm-up replay."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import urllib.error
import urllib.request

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_log_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from keras_attn.serving.limits import RequestLimits
from keras_attn.serving.servable import LoadError, load_servable
from keras_attn.serving.server import ModelServer
from keras_attn.serving.warmup import run_warmup, warmup_path

from .conftest import MODEL_NAME
from .test_batching import RecordingFunctions

TIMEOUT = 20


def request(texts, name=MODEL_NAME, signature_name=""):
    message = predict_pb2.PredictRequest()
    message.model_spec.name = name
    message.model_spec.signature_name = signature_name
    message.inputs["text"].CopyFrom(tf.make_tensor_proto(list(texts), dtype=tf.string))
    return message


def translations(response):
    return tf.make_ndarray(response.outputs["translation"]).tolist()


@pytest.fixture
def serve():
    servers = []

    def start(*args, **kwargs):
        server = ModelServer(*args, port=0, file_system_poll_wait_seconds=0, **kwargs).start()
        servers.append(server)
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        return server, prediction_service_pb2_grpc.PredictionServiceStub(channel)

    yield start
    for server in servers:
        server.stop(grace=1.0)


def test_a_request_over_the_message_limit_is_resource_exhausted(serve, model_base_path):
    server, stub = serve(
        MODEL_NAME,
        model_base_path,
        grpc_channel_arguments="grpc.max_receive_message_length=4096",
    )
    with pytest.raises(grpc.RpcError) as error:
        stub.Predict(request(["word " * 2000]), timeout=TIMEOUT)
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # gRPC core's own message (the stock server runs on the same core).
    assert re.fullmatch(
        r"(SERVER: )?Received message larger than max \(\d+ vs\. 4096\)", error.value.details()
    )
    assert translations(stub.Predict(request(["a b"]), timeout=TIMEOUT)) == [b"b a"]


def test_deadlines_are_honoured(serve, model_base_path):
    servable = load_servable(MODEL_NAME, model_base_path)
    functions = RecordingFunctions(servable.functions, hold_first=True)
    server, stub = serve(
        MODEL_NAME,
        model_base_path,
        servable=dataclasses.replace(servable, functions=functions),
        enable_batching=True,
        rest_api_port=0,
        rest_api_timeout_in_ms=300,
    )
    held = stub.Predict.future(request(["x y"]), timeout=TIMEOUT)
    assert functions.entered.wait(TIMEOUT)
    # Queued behind the held call: their deadlines pass before they can run.
    with pytest.raises(grpc.RpcError) as error:
        stub.Predict(request(["a b"]), timeout=0.3)
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    url = f"http://127.0.0.1:{server.rest_api_port}/v1/models/{MODEL_NAME}:predict"
    with pytest.raises(urllib.error.HTTPError) as http_error:
        urllib.request.urlopen(url, b'{"instances": ["a b"]}', timeout=TIMEOUT)
    assert http_error.value.code == 504
    assert json.loads(http_error.value.read()) == {"error": "Deadline Exceeded"}
    functions.release.set()
    assert translations(held.result()) == [b"y x"]
    assert translations(stub.Predict(request(["c d"]), timeout=TIMEOUT)) == [b"d c"]


def test_prometheus_metrics_on_the_rest_port(serve, model_base_path, tmp_path):
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text(
        'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n'
    )
    server, stub = serve(
        MODEL_NAME, model_base_path, rest_api_port=0, monitoring_config_file=str(monitoring)
    )
    for _ in range(3):
        stub.Predict(request(["a b"], signature_name="translate"), timeout=TIMEOUT)
    with pytest.raises(grpc.RpcError):
        stub.Predict(request(["a"], signature_name="nope"), timeout=TIMEOUT)
    body = b'{"instances": ["a b"]}'
    url = f"http://127.0.0.1:{server.rest_api_port}"
    with urllib.request.urlopen(f"{url}/v1/models/{MODEL_NAME}:predict", body, TIMEOUT) as answer:
        assert answer.status == 200
    with urllib.request.urlopen(f"{url}/monitoring/prometheus/metrics", timeout=TIMEOUT) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = answer.read().decode()
    lines = set(text.splitlines())
    assert "# TYPE :tensorflow:serving:request_count counter" in lines
    assert ':tensorflow:serving:request_count{model_name="translator",status="OK"} 4' in lines
    assert (
        ':tensorflow:serving:request_count{model_name="translator",status="FAILED_PRECONDITION"} 1'
        in lines
    )
    assert "# TYPE :tensorflow:serving:request_latency histogram" in lines
    grpc_latency = '{model_name="translator",API="Predict",entrypoint="GRPC"}'
    assert f":tensorflow:serving:request_latency_count{grpc_latency} 4" in lines
    rest_latency = '{model_name="translator",API="Predict",entrypoint="REST"}'
    assert f":tensorflow:serving:request_latency_count{rest_latency} 1" in lines
    infinity = '{model_name="translator",API="Predict",entrypoint="GRPC",le="+Inf"}'
    assert f":tensorflow:serving:request_latency_bucket{infinity} 4" in lines
    by_signature = (
        '{model_name="translator",signature_name="translate",API="Predict",entrypoint="GRPC",'
        'status="OK"}'
    )
    assert f":keras_attn:serving:request_latency_count{by_signature} 3" in lines


def write_warmup(version_dir, logs):
    path = warmup_path(str(version_dir))
    (version_dir / "assets.extra").mkdir(exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for log in logs:
            writer.write(log if isinstance(log, bytes) else log.SerializeToString())


def predict_log(texts, key="text"):
    log = prediction_log_pb2.PredictionLog()
    log.predict_log.request.model_spec.name = MODEL_NAME
    log.predict_log.request.inputs[key].CopyFrom(tf.make_tensor_proto(texts, dtype=tf.string))
    return log


@pytest.fixture
def warm_base(tmp_path, latest_path):
    shutil.copytree(latest_path, tmp_path / MODEL_NAME / "4")
    return tmp_path / MODEL_NAME


def test_warmup_requests_are_replayed_before_the_version_is_available(serve, warm_base):
    write_warmup(warm_base / "4", [predict_log(["a b"]), predict_log(["c", "d e"])])
    servable = load_servable(MODEL_NAME, str(warm_base))
    functions = RecordingFunctions(servable.functions)
    server, stub = serve(
        MODEL_NAME,
        str(warm_base),
        servable=dataclasses.replace(servable, functions=functions),
        num_request_iterations_for_warmup=2,
    )
    assert functions.batch_sizes == [1, 2, 1, 2]  # two records, twice, before serving
    assert translations(stub.Predict(request(["x y"]), timeout=TIMEOUT)) == [b"y x"]
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    status = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(
        get_model_status_pb2.GetModelStatusRequest(model_spec={"name": MODEL_NAME}),
        timeout=TIMEOUT,
    )
    assert status.model_version_status[0].state == get_model_status_pb2.ModelVersionStatus.AVAILABLE


@pytest.mark.parametrize(
    "records, code, message",
    [
        (
            [b"\xff\xff not a PredictionLog"],
            grpc.StatusCode.DATA_LOSS,
            "Failed to parse warmup record: ",
        ),
        (
            [predict_log(["a"], key="txt")],
            grpc.StatusCode.INVALID_ARGUMENT,
            "Signature input alias: text(feed name: serving_default_text:0) not found",
        ),
        ([predict_log(["a"])] * 1001, grpc.StatusCode.INVALID_ARGUMENT, "Number of warmup records"),
    ],
    ids=["not a PredictionLog", "failing request", "too many records"],
)
def test_a_failing_warmup_fails_the_load(warm_base, records, code, message):
    write_warmup(warm_base / "4", records)
    servable = load_servable(MODEL_NAME, str(warm_base))
    with pytest.raises(Exception) as error:
        run_warmup(servable)
    assert error.value.code == code
    assert error.value.message.startswith(message)

    server = ModelServer(MODEL_NAME, str(warm_base), port=0, max_num_load_retries=0)
    with pytest.raises(LoadError) as error:
        server.start()
    assert error.value.code == grpc.StatusCode.UNKNOWN
    assert f"due to error: {code.name}: {message}" in error.value.message


# ---------------------------------------------------------------------- request caps


def test_request_limits_must_be_positive_ints():
    assert RequestLimits().max_rows_per_request == 1024
    for bad in (0, -1, 1.5, True, "8"):
        with pytest.raises(ValueError, match="Expected max_rows_per_request to be a positive int"):
            RequestLimits(max_rows_per_request=bad)


SMALL = RequestLimits(
    max_request_bytes=4096,
    max_rows_per_request=4,
    max_string_bytes=10,
    max_fill_bytes=100,
    max_json_depth=5,
)


def declared_strings(dims, values=()):
    proto = tf.make_tensor_proto(list(values), dtype=tf.string)
    del proto.tensor_shape.dim[:]
    for size in dims:
        proto.tensor_shape.dim.add(size=size)
    return proto


@pytest.mark.parametrize(
    "proto, message",
    [
        (
            tf.make_tensor_proto(["a"] * 5, dtype=tf.string),
            "Input tensor alias: text has 5 rows, more than the server's limit of 4 per request "
            "(--max_rows_per_request)",
        ),
        (
            tf.make_tensor_proto(["a", "x" * 11], dtype=tf.string),
            "Input tensor alias: text has a string of 11 bytes, more than the server's limit of "
            "10 (--max_string_bytes)",
        ),
        (
            declared_strings([4], ["abcd"]),
            "Input tensor alias: text declares shape [4] (4 elements) but carries 1 values; "
            "filling the rest would take 108 bytes, more than the server's limit of 100 "
            "(--max_fill_bytes)",
        ),
    ],
    ids=["rows", "string bytes", "fill"],
)
def test_each_cap_is_resource_exhausted_on_grpc_and_429_on_rest(
    serve, model_base_path, proto, message
):
    server, stub = serve(MODEL_NAME, model_base_path, rest_api_port=0, limits=SMALL)
    message_request = request([])
    message_request.inputs["text"].CopyFrom(proto)
    with pytest.raises(grpc.RpcError) as error:
        stub.Predict(message_request, timeout=TIMEOUT)
    assert (error.value.code(), error.value.details()) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        message,
    )
    if not message.startswith("Input tensor alias: text declares"):  # JSON always carries all
        values = [v.decode() for v in tf.make_ndarray(proto).tolist()]
        url = f"http://127.0.0.1:{server.rest_api_port}/v1/models/{MODEL_NAME}:predict"
        with pytest.raises(urllib.error.HTTPError) as http_error:
            urllib.request.urlopen(url, json.dumps({"instances": values}).encode(), TIMEOUT)
        assert http_error.value.code == 429
        assert json.loads(http_error.value.read()) == {"error": message}
    # Within the caps (a fill of 3 x 33 = 99 bytes included), the same server answers.
    within = request([])
    within.inputs["text"].CopyFrom(declared_strings([4], ["a"]))
    assert translations(stub.Predict(within, timeout=TIMEOUT)) == [b"a"] * 4
    assert translations(stub.Predict(request(["a b"] * 4), timeout=TIMEOUT)) == [b"b a"] * 4


def test_the_request_size_cap_bounds_grpc_messages_and_rest_bodies(serve, model_base_path):
    server, stub = serve(MODEL_NAME, model_base_path, rest_api_port=0, limits=SMALL)
    with pytest.raises(grpc.RpcError) as error:
        stub.Predict(request(["abc"] * 2000), timeout=TIMEOUT)
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert re.fullmatch(
        r"(SERVER: )?Received message larger than max \(\d+ vs\. 4096\)", error.value.details()
    )
    url = f"http://127.0.0.1:{server.rest_api_port}/v1/models/{MODEL_NAME}:predict"
    body = json.dumps({"instances": ["a"], "pad": "x" * 5000}).encode()
    with pytest.raises(urllib.error.HTTPError) as http_error:
        urllib.request.urlopen(url, body, TIMEOUT)
    assert http_error.value.code == 413
    assert set(json.loads(http_error.value.read())) == {"error"}
    # A smaller gRPC cap from the channel arguments wins; a larger one does not lift the limit.
    for argument, cap in ((1000, 1000), (100_000_000, 4096)):
        _, stub = serve(
            MODEL_NAME, model_base_path, limits=SMALL,
            grpc_channel_arguments=f"grpc.max_receive_message_length={argument}",
        )  # fmt: skip
        with pytest.raises(grpc.RpcError) as error:
            stub.Predict(request(["abc"] * 2000), timeout=TIMEOUT)
        assert f"vs. {cap})" in error.value.details()


def test_json_nesting_is_capped(serve, model_base_path):
    server, _ = serve(MODEL_NAME, model_base_path, rest_api_port=0, limits=SMALL)
    url = f"http://127.0.0.1:{server.rest_api_port}/v1/models/{MODEL_NAME}:predict"
    with pytest.raises(urllib.error.HTTPError) as http_error:
        urllib.request.urlopen(url, b'{"instances": [[[[["a"]]]]]}', TIMEOUT)  # 6 levels
    assert http_error.value.code == 400
    assert json.loads(http_error.value.read()) == {
        "error": "JSON Parse error: The document is nested more than 5 levels deep "
        "(--max_json_depth)"
    }
    with pytest.raises(urllib.error.HTTPError) as http_error:
        urllib.request.urlopen(url, b'{"instances": [[[["a"]]]]}', TIMEOUT)  # 5: a shape error
    assert "expects shape [-1]" in json.loads(http_error.value.read())["error"]


def test_examples_count_against_rows_and_shared_context_against_fill(serve, calculator_base_path):
    _, stub = serve("calculator", calculator_base_path, limits=SMALL)
    classify = classification_pb2.ClassificationRequest()
    classify.model_spec.name, classify.model_spec.signature_name = "calculator", "classify"
    for value in range(5):
        classify.input.example_list.examples.add().features.feature["x"].float_list.value.append(
            value
        )
    with pytest.raises(grpc.RpcError) as error:
        stub.Classify(classify, timeout=TIMEOUT)
    assert (error.value.code(), error.value.details()) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "Input has 5 rows, more than the server's limit of 4 per request (--max_rows_per_request)",
    )
    regress = regression_pb2.RegressionRequest()
    regress.model_spec.name, regress.model_spec.signature_name = "calculator", "regress"
    with_context = regress.input.example_list_with_context
    with_context.context.features.feature["pad"].bytes_list.value.append(b"p" * 60)
    for value in range(3):
        with_context.examples.add().features.feature["x"].float_list.value.append(value)
    with pytest.raises(grpc.RpcError) as error:
        stub.Regress(regress, timeout=TIMEOUT)
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.value.details().startswith("Input has 3 examples sharing a context of ")
    del with_context.examples[2]  # one copy of the context more than the request: 70 bytes
    response = stub.Regress(regress, timeout=TIMEOUT)
    assert [r.value for r in response.result.regressions] == [0.0, 2.0]


def test_warmup_records_are_the_models_own_and_not_capped(serve, warm_base):
    rows = RequestLimits().max_rows_per_request + 3  # over the default cap and the server's
    write_warmup(warm_base / "4", [predict_log(["a b"] * rows)])
    servable = load_servable(MODEL_NAME, str(warm_base))
    functions = RecordingFunctions(servable.functions)
    _, stub = serve(
        MODEL_NAME,
        str(warm_base),
        servable=dataclasses.replace(servable, functions=functions),
        limits=SMALL,
        max_num_load_retries=0,
    )
    assert functions.batch_sizes == [rows]
    assert translations(stub.Predict(request(["x y"]), timeout=TIMEOUT)) == [b"y x"]
