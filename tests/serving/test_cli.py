"""`keras-attn serve` (as a real subprocess) and `keras-attn translate` through the dispatcher."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import grpc
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_attn.cli import build_parser, main
from keras_attn.serving.client import TranslatorClient

from .conftest import LATEST_VERSION, MODEL_NAME

READY = re.compile(
    r"^Serving translator version (\d+) on 127\.0\.0\.1:(\d+) \(gRPC\), REST on 127\.0\.0\.1:(\d+)$"
)


BATCH_TIMEOUT_S = 3.0


def _lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def test_serve_subprocess_answers_then_drains_on_sigterm(
    model_base_path, closed_port, capsys, tmp_path
):
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text("prometheus_config { enable: true }\n")
    # A full batch (2 texts) runs at once; a lone text waits BATCH_TIMEOUT_S for company, which
    # keeps it in flight while SIGTERM arrives.
    batching = tmp_path / "batching.txt"
    batching.write_text(
        "max_batch_size { value: 2 }\n"
        f"batch_timeout_micros {{ value: {int(BATCH_TIMEOUT_S * 1e6)} }}\n"
        "num_batch_threads { value: 1 }\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "keras_attn.cli", "serve", "--port", "0"]
    command += ["--rest_api_port", str(closed_port), "--model_name", MODEL_NAME]
    command += ["--model_base_path", model_base_path, "--enable_batching"]
    command += ["--batching_parameters_file", str(batching)]
    command += ["--monitoring_config_file", str(monitoring)]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True).start()
    try:
        ready = lines.get(timeout=120)
        assert ready is not None, process.stderr.read()
        match = READY.match(ready)
        assert match, ready
        assert int(match.group(1)) == LATEST_VERSION
        target, rest_port = f"127.0.0.1:{match.group(2)}", int(match.group(3))
        assert rest_port == closed_port

        translate = ["translate", "--server", target, "--model_name", MODEL_NAME]
        assert main([*translate, "a b", "c d e"]) == 0
        assert capsys.readouterr().out == "b a\ne d c\n"

        url = f"http://127.0.0.1:{rest_port}/v1/models/{MODEL_NAME}"
        with urllib.request.urlopen(url, timeout=20) as answer:
            status = json.loads(answer.read())["model_version_status"][0]
        assert status["state"] == "AVAILABLE"
        url = f"http://127.0.0.1:{rest_port}/monitoring/prometheus/metrics"
        with urllib.request.urlopen(url, timeout=20) as answer:
            metrics = answer.read().decode().splitlines()
        assert ':tensorflow:serving:request_count{model_name="translator",status="OK"} 1' in metrics

        with grpc.insecure_channel(target) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(), timeout=60
            )
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
            predict = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict
            request = predict_pb2.PredictRequest()
            request.model_spec.name = MODEL_NAME
            request.inputs["text"].CopyFrom(tf.make_tensor_proto(["x y z"], dtype=tf.string))
            started = time.monotonic()
            in_flight = predict.future(request, timeout=60)
            time.sleep(1.0)  # the request now waits in the batch queue
            process.send_signal(signal.SIGTERM)

            # Health turns NOT_SERVING first, while the request is still in flight; the Watch
            # stream then ends (OK) instead of holding the drain open.
            assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
            assert not in_flight.done()
            assert list(watch) == []
            # New requests are refused ...
            time.sleep(0.2)
            with pytest.raises(grpc.RpcError) as refused:
                predict(request, timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            # ... and the one in flight completes, after its batch timeout.
            response = in_flight.result(timeout=30)
            assert time.monotonic() - started >= BATCH_TIMEOUT_S - 0.1
            assert tf.make_ndarray(response.outputs["translation"]).tolist() == [b"z y x"]

        assert process.wait(timeout=60) == 0
        assert lines.get(timeout=10) == f"Stopped serving {MODEL_NAME}."
        assert process.stderr.read() == ""  # TensorFlow's start-up logging included
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()


def test_serve_translate_and_the_client_default_to_the_same_model_name():
    parser = build_parser()
    serve = parser.parse_args(["serve", "--model_base_path", "models"])
    translate = parser.parse_args(["translate", "--server", "localhost:8500", "a"])
    with TranslatorClient("localhost:8500") as client:
        client_default = client.model_name
    # As tensorflow_model_server names a model when --model_name is not given.
    assert serve.model_name == translate.model_name == client_default == "default"


@pytest.mark.parametrize("scheme", ["", "dns:///"], ids=["host:port", "dns target"])
def test_translate_prints_one_translation_per_line(target, capsys, scheme):
    server = scheme + target
    assert main(["translate", "--server", server, "--model_name", MODEL_NAME, "x y z", "w"]) == 0
    assert capsys.readouterr().out == "z y x\nw\n"


def test_translate_alignment_prints_each_translation_with_its_heatmap(target, capsys):
    # The fixture translator reverses the words and aligns target position t to source t.
    assert main(["translate", "--server", target, "--model_name", MODEL_NAME, "--alignment",
                 "x y z", "w"]) == 0  # fmt: skip
    assert capsys.readouterr().out == (
        "z y x\n  x y z\nz █ · ·\ny · █ ·\nx · · █\n\nw\n  w\nw █\n\n"
        "· <0.2  ░ <0.4  ▒ <0.6  ▓ <0.8  █ >=0.8\n"
    )


def test_translate_alignment_takes_no_signature(capsys):
    argv = ["translate", "--server", "localhost:1", "--alignment", "--signature", "translate", "a"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "keras-attn translate: error: --alignment calls translate_with_alignment: leave out "
        "--signature\n"
    )


def test_translate_against_a_closed_port_is_one_line(closed_port, capsys):
    assert main(["translate", "--server", f"127.0.0.1:{closed_port}", "--timeout", "10", "a"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"keras-attn translate: cannot reach a model server at 127.0.0.1:{closed_port} "
        "(UNAVAILABLE)\n"
    )


def test_translate_rpc_error_is_one_line(target, capsys):
    assert main(["translate", "--server", target, "--model_name", "nope", "a"]) == 1
    assert capsys.readouterr().err == (
        "keras-attn translate: NOT_FOUND: Servable not found for request: Latest(nope)\n"
    )


def test_translate_needs_host_and_port(capsys):
    assert main(["translate", "--server", "localhost", "a"]) == 2
    assert capsys.readouterr().err == (
        "keras-attn translate: error: --server must be HOST:PORT or dns:///HOST:PORT, got "
        "'localhost'\n"
    )


@pytest.mark.parametrize(
    "layout, message",
    [
        (None, "Could not find base path {base} for servable translator"),
        (
            ["latest/", "notes.txt"],
            "No versions of servable translator found under base path {base}. Did you forget "
            "to name your leaf directory as a number (eg. '/1/')?",
        ),
        (
            ["1/"],
            "1 model(s) did not become available: {{{{name: translator version: 1 due to error: "
            "NOT_FOUND: Could not find SavedModel .pb or .pbtxt at supplied export directory "
            "path: {base}/1. Check that the directory exists and that you have the right "
            "permissions for accessing it.}}, }}",
        ),
    ],
    ids=["missing", "no integer version", "not a SavedModel"],
)
def test_serve_with_a_bad_model_directory_is_one_line(tmp_path, capsys, layout, message):
    base = tmp_path / "translator"
    for entry in layout or []:
        if entry.endswith("/"):
            (base / entry).mkdir(parents=True)
        else:
            base.mkdir(exist_ok=True)
            (base / entry).write_text("x")
    args = ["serve", "--port", "0", "--model_name", MODEL_NAME, "--model_base_path", str(base)]
    # Without polling (0) nothing could pick a version up later, so a missing or empty base path
    # fails at once; with polling it is waited for, as stock does (test_model_management.py).
    args += ["--file_system_poll_wait_seconds", "0", "--max_num_load_retries", "0"]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.err == f"keras-attn serve: error: {message.format(base=base)}\n"
    assert captured.out == ""


@pytest.mark.parametrize("api", ["gRPC", "REST"])
def test_serve_on_a_port_in_use_is_one_line(server, model_base_path, capsys, api):
    args = ["serve", "--model_name", MODEL_NAME, "--model_base_path", model_base_path]
    if api == "gRPC":
        args += ["--port", str(server.port)]
        message = f"cannot bind gRPC address 127.0.0.1:{server.port} (in use, or not an address "
        message += "of this host)"
    else:
        args += ["--port", "0", "--rest_api_port", str(server.rest_api_port)]
        message = (
            f"cannot bind REST address 127.0.0.1:{server.rest_api_port}: Address already in use"
        )
    assert main(args) == 2
    assert capsys.readouterr().err == f"keras-attn serve: error: {message}\n"


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "Both server_options.model_base_path and server_options.model_config_file are empty!"),
        (
            ["--model_base_path", "{base}", "--batching_parameters_file", "b.txt"],
            "server_options.batching_parameters_file is set without setting "
            "server_options.enable_batching to true.",
        ),
        (["--model_config_file", "{base}/nope.config"], "{base}/nope.config; No such file"),
        (
            ["--model_base_path", "{base}", "--grpc_channel_arguments", "oops"],
            "expected key=value in --grpc_channel_arguments, got 'oops'",
        ),
    ],
    ids=["no model", "batching file without batching", "missing config file", "bad channel args"],
)
def test_serve_flag_mistakes_are_one_line(model_base_path, capsys, extra, message):
    args = ["serve", "--port", "0", *(a.format(base=model_base_path) for a in extra)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"keras-attn serve: error: {message.format(base=model_base_path)}")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--max_rows_per_request", "0", "expected an integer > 0, got 0"),
        ("--max_request_bytes", "-5", "expected an integer > 0, got -5"),
        ("--max_fill_bytes", "lots", "expected an integer, got 'lots'"),
        ("--rest_api_num_threads", "0", "expected an integer > 0, got 0"),
    ],
)
def test_serve_limit_flags_must_be_positive_integers(model_base_path, capsys, flag, value, message):
    with pytest.raises(SystemExit) as exit_code:
        main(["serve", "--model_base_path", model_base_path, flag, value])
    assert exit_code.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"keras-attn serve: error: argument {flag}: {message}"
