"""Model management against the stock server's behaviour: a ModelServerConfig with several
models, version policies and labels, new versions picked up by polling, a failed version reported
by GetModelStatus while the previous one keeps serving, and HandleReloadConfigRequest."""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
import urllib.request

import grpc
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)
from tensorflow_serving.config import model_server_config_pb2

from keras_attn.serving.config import aspired_versions
from keras_attn.serving.servable import LoadError
from keras_attn.serving.server import ModelServer

TIMEOUT = 20
State = get_model_status_pb2.ModelVersionStatus


def predict(stub, name, texts=("a b",), **spec):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    if "version" in spec:
        request.model_spec.version.value = spec["version"]
    if "label" in spec:
        request.model_spec.version_label = spec["label"]
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(list(texts), dtype=tf.string))
    return stub.Predict(request, timeout=TIMEOUT)


def states(stub, name):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    response = stub.GetModelStatus(request, timeout=TIMEOUT)
    return [
        (s.version, State.State.Name(s.state), s.status.error_code, s.status.error_message)
        for s in response.model_version_status
    ]


def wait_for(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def make_models(root, latest_path, calculator_base_path):
    """translator/{1,2,3} and calculator/7 under `root`."""
    for version in (1, 2, 3):
        shutil.copytree(latest_path, root / "translator" / str(version))
    shutil.copytree(calculator_base_path, root / "calculator")
    return root


@pytest.fixture
def models(tmp_path, latest_path, calculator_base_path):
    return make_models(tmp_path, latest_path, calculator_base_path)


def config_text(root, translator_policy="all {}", labels=""):
    return f"""
model_config_list {{
  config {{
    name: "translator"
    base_path: "{root / "translator"}"
    model_platform: "tensorflow"
    model_version_policy {{ {translator_policy} }}
    {labels}
  }}
  config {{
    name: "calculator"
    base_path: "{root / "calculator"}"
    model_platform: "tensorflow"
  }}
}}
"""


def serve_config(models):
    config_file = models / "models.config"
    config_file.write_text(
        config_text(
            models,
            labels='version_labels { key: "stable" value: 1 } '
            'version_labels { key: "canary" value: 3 }',
        )
    )
    server = ModelServer(
        model_config_file=str(config_file),
        port=0,
        rest_api_port=0,
        file_system_poll_wait_seconds=0.1,
        allow_version_labels_for_unavailable_models=True,
        max_num_load_retries=0,
    ).start()
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield (
            server,
            prediction_service_pb2_grpc.PredictionServiceStub(channel),
            model_service_pb2_grpc.ModelServiceStub(channel),
        )
    server.stop(grace=1.0)


@pytest.fixture(scope="module")
def shared_models(tmp_path_factory, latest_path, calculator_base_path):
    return make_models(tmp_path_factory.mktemp("shared"), latest_path, calculator_base_path)


@pytest.fixture(scope="module")
def served(shared_models):
    """A server that only sees requests that change nothing (lookups, refused reloads)."""
    yield from serve_config(shared_models)


@pytest.fixture
def reloadable(models):
    yield from serve_config(models)


def test_version_policies_pick_versions_from_disk():
    def model(text):
        return text_format.Parse(text, model_server_config_pb2.ModelConfig())

    on_disk = [1, 2, 5, 9]
    assert aspired_versions(model(""), on_disk) == {9}
    latest_two = "model_version_policy { latest { num_versions: 2 } }"
    assert aspired_versions(model(latest_two), on_disk) == {5, 9}
    assert aspired_versions(model("model_version_policy { all {} }"), on_disk) == {1, 2, 5, 9}
    specific = "model_version_policy { specific { versions: 2 versions: 3 } }"
    assert aspired_versions(model(specific), on_disk) == {2}


def test_config_file_serves_several_models_versions_and_labels(served):
    server, stub, models_stub = served
    assert server.describe_models() == "translator version 3, calculator version 7"
    assert [s[:2] for s in states(models_stub, "translator")] == [
        (3, "AVAILABLE"),
        (2, "AVAILABLE"),
        (1, "AVAILABLE"),
    ]
    assert predict(stub, "translator").model_spec.version.value == 3
    assert predict(stub, "translator", version=2).model_spec.version.value == 2
    assert predict(stub, "translator", label="stable").model_spec.version.value == 1
    assert predict(stub, "translator", label="canary").model_spec.version.value == 3
    response = predict(stub, "calculator", texts=["2.5"])
    assert tf.make_ndarray(response.outputs["value"]).tolist() == [2.5]
    assert response.model_spec.version.value == 7

    with pytest.raises(grpc.RpcError) as error:
        predict(stub, "translator", label="nightly")
    assert (error.value.code(), error.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Unrecognized servable version label: nightly",
    )


def rest(server, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    url = f"http://127.0.0.1:{server.rest_api_port}{path}"
    with urllib.request.urlopen(url, data, timeout=TIMEOUT) as answer:
        return json.loads(answer.read())


def test_rest_routes_to_versions_and_labels(served):
    server = served[0]
    status = rest(server, "/v1/models/translator/labels/stable")
    # As stock, status ignores the label and lists every version, highest first.
    assert [s["version"] for s in status["model_version_status"]] == ["3", "2", "1"]
    assert rest(server, "/v1/models/translator/versions/2")["model_version_status"] == [
        {"version": "2", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
    ]
    for path, version in (
        ("/v1/models/translator/metadata", "3"),
        ("/v1/models/translator/versions/2/metadata", "2"),
        ("/v1/models/translator/labels/stable/metadata", "1"),
    ):
        assert rest(server, path)["model_spec"] == {
            "name": "translator",
            "signature_name": "",
            "version": version,
        }
    body = {"instances": ["a b c"]}
    answer = rest(server, "/v1/models/translator/labels/canary:predict", body)
    assert answer["predictions"][0]["translation"] == "c b a"
    answer = rest(server, "/v1/models/calculator/versions/7:predict", {"inputs": ["2.5", "-1"]})
    assert answer == {"outputs": [2.5, -1.0]}


def test_new_versions_are_picked_up_and_a_failed_one_keeps_the_previous(models, latest_path):
    server = ModelServer(
        "translator",
        str(models / "translator"),
        port=0,
        file_system_poll_wait_seconds=0.1,
        max_num_load_retries=0,
    ).start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            models_stub = model_service_pb2_grpc.ModelServiceStub(channel)
            assert [s[:2] for s in states(models_stub, "translator")] == [(3, "AVAILABLE")]

            # A new version: loaded without a restart, then the old one is unloaded (latest 1).
            # Versions appear by rename, as a deployment should publish them: the poller
            # must never see a half-copied directory.
            shutil.copytree(latest_path, models / "translator" / ".partial-5")
            (models / "translator" / ".partial-5").rename(models / "translator" / "5")
            wait_for(lambda: predict(stub, "translator").model_spec.version.value == 5)
            wait_for(lambda: states(models_stub, "translator")[1][1] == "END")
            assert states(models_stub, "translator") == [
                (5, "AVAILABLE", 0, ""),
                (3, "END", 0, ""),
            ]

            # A broken version: END with the loader's error; version 5 keeps serving.
            broken = models / "translator" / "6"
            staging = models / "translator" / ".partial-6"
            staging.mkdir()
            (staging / "saved_model.pb").write_bytes(b"\xff not a proto")
            staging.rename(broken)
            wait_for(lambda: states(models_stub, "translator")[0][1] == "END")
            version, state, code, message = states(models_stub, "translator")[0]
            assert (version, state, code) == (6, "END", grpc.StatusCode.DATA_LOSS.value[0])
            assert message == f"Can't parse {broken / 'saved_model.pb'} as binary proto"
            assert states(models_stub, "translator")[1][:2] == (5, "AVAILABLE")
            response = predict(stub, "translator", texts=["x y z"])
            assert response.model_spec.version.value == 5
            assert tf.make_ndarray(response.outputs["translation"]).tolist() == [b"z y x"]
    finally:
        server.stop(grace=1.0)


def reload(models_stub, text):
    request = model_management_pb2.ReloadConfigRequest()
    text_format.Parse(text, request.config)
    return models_stub.HandleReloadConfigRequest(request, timeout=TIMEOUT)


def test_reload_config_changes_policies_labels_and_models(reloadable, models):
    server, stub, models_stub = reloadable
    # Keep the two latest versions, move "stable" to version 2 and drop calculator.
    text = config_text(
        models,
        translator_policy="latest { num_versions: 2 }",
        labels='version_labels { key: "stable" value: 2 }',
    )
    text = text[: text.index('  config {\n    name: "calculator"')] + "}\n"
    response = reload(models_stub, text)
    assert response.status.error_code == 0
    assert predict(stub, "translator", label="stable").model_spec.version.value == 2
    assert [s[:2] for s in states(models_stub, "translator")] == [
        (3, "AVAILABLE"),
        (2, "AVAILABLE"),
        (1, "END"),
    ]
    with pytest.raises(grpc.RpcError) as error:
        predict(stub, "translator", label="canary")
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as error:
        predict(stub, "calculator", texts=["1"])
    assert (error.value.code(), error.value.details()) == (
        grpc.StatusCode.NOT_FOUND,
        "Servable not found for request: Latest(calculator)",
    )
    assert [s[:2] for s in states(models_stub, "calculator")] == [(7, "END")]


RELOAD_ERRORS = [
    (
        "model listed twice",
        lambda root: (
            f'model_config_list {{ config {{ name: "a" base_path: "{root}" '
            f'model_platform: "tensorflow" }} config {{ name: "a" base_path: "{root}" '
            'model_platform: "tensorflow" } }'
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Illegal to list model a multiple times in config list",
    ),
    (
        "relative base path",
        lambda root: (
            'model_config_list { config { name: "a" base_path: "models/a" '
            'model_platform: "tensorflow" } }'
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Expected model a to have an absolute path or URI; got base_path()=models/a",
    ),
    (
        "no platform",
        lambda root: f'model_config_list {{ config {{ name: "a" base_path: "{root}" }} }}',
        grpc.StatusCode.INVALID_ARGUMENT,
        "Illegal setting neither ModelServerConfig::model_type (deprecated) nor "
        "ModelServerConfig::model_platform.",
    ),
    (
        "unsupported platform",
        lambda root: (
            f'model_config_list {{ config {{ name: "a" base_path: "{root}" '
            'model_platform: "pytorch" } }'
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Model a requests unsupported platform pytorch",
    ),
    (
        "label moved to a version that is not available",
        lambda root: config_text(root, labels='version_labels { key: "stable" value: 9 }'),
        grpc.StatusCode.FAILED_PRECONDITION,
        "Request to assign label to version 9 of model translator, which is not currently "
        "available for inference",
    ),
    (
        "new model without a base path",
        lambda root: (
            f'model_config_list {{ config {{ name: "b" base_path: "{root}/nope" '
            'model_platform: "tensorflow" } }'
        ),
        grpc.StatusCode.NOT_FOUND,
        "Could not find base path {root}/nope for servable b",
    ),
]


@pytest.mark.parametrize(
    "make_config, code, message",
    [case[1:] for case in RELOAD_ERRORS],
    ids=[case[0] for case in RELOAD_ERRORS],
)
def test_reload_config_errors_match_the_stock_server(
    served, shared_models, make_config, code, message
):
    server, stub, models_stub = served
    with pytest.raises(grpc.RpcError) as error:
        reload(models_stub, make_config(shared_models))
    assert (error.value.code(), error.value.details()) == (
        code,
        message.format(root=shared_models),
    )
    assert predict(stub, "translator", label="stable").model_spec.version.value == 1


def test_labels_at_start_need_the_stock_flag(models):
    config_file = models / "models.config"
    config_file.write_text(config_text(models, labels='version_labels { key: "stable" value: 1 }'))
    server = ModelServer(model_config_file=str(config_file), port=0)
    with pytest.raises(LoadError) as error:
        server.start()
    assert error.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert str(error.value) == (
        "Request to assign label to version 1 of model translator, which is not currently "
        "available for inference"
    )


def test_the_config_file_is_polled(models):
    config_file = models / "models.config"
    config_file.write_text(config_text(models))
    server = ModelServer(
        model_config_file=str(config_file),
        port=0,
        file_system_poll_wait_seconds=0,
        model_config_file_poll_wait_seconds=0.1,
    ).start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            with pytest.raises(grpc.RpcError):
                predict(stub, "translator", label="stable")
            config_file.write_text(
                config_text(models, labels='version_labels { key: "stable" value: 2 }')
            )

            def labelled():
                try:
                    return predict(stub, "translator", label="stable").model_spec.version.value
                except grpc.RpcError:
                    return None

            wait_for(lambda: labelled() == 2)
    finally:
        server.stop(grace=1.0)


def test_start_up_waits_for_a_missing_base_path_and_says_why_on_every_poll(
    tmp_path, latest_path, caplog
):
    """Stock: a base path that does not exist (yet) is polled for, one error line per poll, and
    the server starts once a version appears (e.g. an export still being copied in)."""
    caplog.set_level(logging.WARNING, logger="keras_attn.serving.manager")
    base = tmp_path / "translator"
    server = ModelServer("translator", str(base), port=0, file_system_poll_wait_seconds=0.1)
    starting = threading.Thread(target=server.start)
    starting.start()
    try:
        missing = (
            "FileSystemStoragePathSource encountered a filesystem access error: Could not find "
            f"base path {base} for servable translator with error NOT_FOUND: {base} not found"
        )
        wait_for(lambda: [r.getMessage() for r in caplog.records].count(missing) >= 3)
        assert starting.is_alive()
        base.mkdir()
        empty = f"No versions of servable translator found under base path {base}. Did you"
        wait_for(lambda: any(r.getMessage().startswith(empty) for r in caplog.records))
        assert starting.is_alive()
        shutil.copytree(latest_path, base / ".partial-5")
        (base / ".partial-5").rename(base / "5")
        starting.join(TIMEOUT)
        assert not starting.is_alive()
        assert server.version == 5
    finally:
        starting.join(TIMEOUT)
        server.stop(grace=1.0)


def test_without_polling_a_missing_base_path_fails_at_once(tmp_path):
    server = ModelServer(
        "translator", str(tmp_path / "nope"), port=0, file_system_poll_wait_seconds=0
    )
    with pytest.raises(LoadError, match="Could not find base path .*/nope for servable translator"):
        server.start()


def test_every_failed_load_attempt_is_logged_at_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="keras_attn.serving.manager")
    (tmp_path / "translator" / "1").mkdir(parents=True)
    server = ModelServer(
        "translator",
        str(tmp_path / "translator"),
        port=0,
        max_num_load_retries=2,
        load_retry_interval_micros=100_000,
    )
    with pytest.raises(LoadError, match="1 model\\(s\\) did not become available"):
        server.start()
    failure = (
        "Loading servable: {name: translator version: 1} failed: NOT_FOUND: Could not find "
        f"SavedModel .pb or .pbtxt at supplied export directory path: {tmp_path}/translator/1."
    )
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(failure)]
    assert [line[line.rindex("permissions") :] for line in lines] == [
        "permissions for accessing it. Retry 1 of 2 in 0.1 s.",
        "permissions for accessing it. Retry 2 of 2 in 0.1 s.",
        "permissions for accessing it. Gave up after 2 retries.",
    ]


def test_start_up_waits_for_a_specific_version_that_is_not_on_disk(tmp_path, latest_path, caplog):
    caplog.set_level(logging.WARNING, logger="keras_attn.serving.manager")
    base = tmp_path / "translator"
    shutil.copytree(latest_path, base / "1")
    config = text_format.Parse(
        f'model_config_list {{ config {{ name: "translator" base_path: "{base}" '
        'model_platform: "tensorflow" model_version_policy { specific { versions: 2 } } } }',
        model_server_config_pb2.ModelServerConfig(),
    )
    server = ModelServer(model_config=config, port=0, file_system_poll_wait_seconds=0.1)
    starting = threading.Thread(target=server.start)
    starting.start()
    try:
        absent = (
            "Version 2 of servable translator, which was requested to be served as a 'specific' "
            "version in the servable's version policy, was not found in the file system"
        )
        wait_for(lambda: [r.getMessage() for r in caplog.records].count(absent) >= 2)
        assert starting.is_alive()
        shutil.copytree(latest_path, base / ".partial-2")
        (base / ".partial-2").rename(base / "2")
        starting.join(TIMEOUT)
        assert not starting.is_alive()
        assert server.manager.available() == {"translator": [2]}
    finally:
        starting.join(TIMEOUT)
        server.stop(grace=1.0)
