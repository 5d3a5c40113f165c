"""`keras-attn serve --xla_cpu_compilation_enabled`: stock TensorFlow Serving's XLA switch.

Off (the stock default), a SavedModel whose signature calls a `tf.function(jit_compile=True)`
loads, but calling that signature fails with INTERNAL `XLA compilation disabled` (over REST: 500
with that message), while its uncompiled signatures answer; on, the compiled signature answers
the same values as the NumPy reference.
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_attn.cli import main
from keras_attn.export.warmup import write_warmup_requests
from keras_attn.serving.cli import add_parsers
from keras_attn.serving.core import session_message
from keras_attn.serving.servable import load_servable
from keras_attn.serving.status import ServingStatus
from keras_attn.serving.warmup import run_warmup
from keras_attn.serving.xla import set_xla_compilation_enabled, xla_compilation_enabled
from keras_attn.testing.server_process import serve_in_subprocess

MODEL_NAME = "compiled"
TIMEOUT = 60.0
# The status stock TensorFlow Serving answers for a compiled signature without the flag:
# tensorflow/compiler/jit/device_compiler.h's message, with the node context TensorFlow's
# executor attaches to a failing op (the signature's call of the compiled function).
STOCK_MESSAGE = "XLA compilation disabled\n\t [[{{node PartitionedCall}}]]"
X = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]], np.float32)


def reference(x: np.ndarray) -> np.ndarray:
    """y = sum_j x_j^2 + 1, per row."""
    return (x.astype(np.float64) ** 2).sum(axis=1) + 1.0


class CompiledModel(tf.Module):
    """`serving_default` runs through XLA (jit_compile=True); `plain` is the same, uncompiled."""

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")], jit_compile=True)
    def compiled(self, x):
        return {"y": tf.reduce_sum(x * x, axis=1) + 1.0}  # (batch,)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def plain(self, x):
        return {"y": tf.reduce_sum(x * x, axis=1) + 1.0}  # (batch,)


@pytest.fixture(scope="module")
def compiled_base_path(tmp_path_factory) -> str:
    base = tmp_path_factory.mktemp("models") / MODEL_NAME
    module = CompiledModel()
    signatures = {"serving_default": module.compiled, "plain": module.plain}
    tf.saved_model.save(module, str(base / "1"), signatures=signatures)
    return str(base)


# ---------------------------------------------------------------------------- the flag


def parse(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="command"))
    return parser.parse_args(["serve", "--model_base_path", "models/x", *flags])


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ((), False),
        (("--xla_cpu_compilation_enabled",), True),
        (("--xla_cpu_compilation_enabled=true",), True),
        (("--xla_cpu_compilation_enabled=1",), True),
        (("--xla_cpu_compilation_enabled", "false"), False),
        (("--xla_cpu_compilation_enabled=0",), False),
    ],
)
def test_flag_parses_like_the_stock_bool_flags(flags, expected):
    assert parse(*flags).xla_cpu_compilation_enabled is expected


def test_a_bad_flag_value_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--model_base_path", "models/x", "--xla_cpu_compilation_enabled=maybe"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(
        "argument --xla_cpu_compilation_enabled: expected true or false, got 'maybe'"
    )


# ------------------------------------------------------------- the switch, in this process


def test_session_run_errors_lose_the_python_header():
    session_run = (
        "Graph execution error:\n\nDetected at node 'PartitionedCall' defined at (most recent "
        "call last):\n  File \"export.py\", line 3, in <module>\nNode: 'PartitionedCall'\n"
        + STOCK_MESSAGE
    )
    assert session_message(session_run) == STOCK_MESSAGE


def test_switch_refuses_then_allows_compilation(compiled_base_path):
    servable = load_servable(MODEL_NAME, compiled_base_path)
    compiled = servable.functions.get("serving_default")
    plain = servable.functions.get("plain")
    before = xla_compilation_enabled()
    try:
        set_xla_compilation_enabled(False)
        assert not xla_compilation_enabled()
        with pytest.raises(tf.errors.InternalError) as error:
            compiled(x=X)
        assert session_message(error.value.message) == STOCK_MESSAGE
        np.testing.assert_allclose(plain(x=X)["y"], reference(X), rtol=1e-6)

        set_xla_compilation_enabled(True)
        assert xla_compilation_enabled()
        np.testing.assert_allclose(compiled(x=X)["y"], reference(X), rtol=1e-6)
    finally:
        set_xla_compilation_enabled(before)
        servable.functions.close()


def test_switch_decides_whether_a_compiled_warmup_request_passes(tmp_path):
    module = CompiledModel()
    version = tmp_path / MODEL_NAME / "1"
    tf.saved_model.save(module, str(version), signatures={"serving_default": module.compiled})
    write_warmup_requests(version, {"serving_default": {"x": X}})
    servable = load_servable(MODEL_NAME, str(tmp_path / MODEL_NAME))
    before = xla_compilation_enabled()
    try:
        set_xla_compilation_enabled(False)
        with pytest.raises(ServingStatus) as status:  # a failed warm-up fails the load
            run_warmup(servable)
        assert (status.value.code, status.value.message) == (
            grpc.StatusCode.INTERNAL,
            STOCK_MESSAGE,
        )
        set_xla_compilation_enabled(True)
        assert run_warmup(servable) == 1
    finally:
        set_xla_compilation_enabled(before)
        servable.functions.close()


# ------------------------------------------------------------ served, over gRPC and REST


def grpc_predict(target: str, signature: str) -> np.ndarray:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = MODEL_NAME
    request.model_spec.signature_name = signature
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(X))
    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        response = stub.Predict(request, timeout=TIMEOUT)
    return tf.make_ndarray(response.outputs["y"])


def rest_predict(port: int, signature: str) -> tuple[int, dict]:
    body = json.dumps({"signature_name": signature, "instances": X.tolist()}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/models/{MODEL_NAME}:predict", data=body, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_served_without_the_flag_a_compiled_signature_fails_as_stock(compiled_base_path):
    with serve_in_subprocess(compiled_base_path, MODEL_NAME, rest_api=True) as server:
        with pytest.raises(grpc.RpcError) as error:
            grpc_predict(server.target, "serving_default")
        assert error.value.code() == grpc.StatusCode.INTERNAL
        assert error.value.details() == STOCK_MESSAGE
        assert rest_predict(server.rest_port, "serving_default") == (
            500,
            {"error": STOCK_MESSAGE},
        )
        # The model loaded: its uncompiled signature answers.
        np.testing.assert_allclose(grpc_predict(server.target, "plain"), reference(X), rtol=1e-6)
        status, answer = rest_predict(server.rest_port, "plain")
        assert status == 200
        np.testing.assert_allclose(answer["predictions"], reference(X), rtol=1e-6)


def test_served_with_the_flag_a_compiled_signature_answers(compiled_base_path):
    flag = ["--xla_cpu_compilation_enabled"]
    with serve_in_subprocess(compiled_base_path, MODEL_NAME, rest_api=True, extra_args=flag) as s:
        np.testing.assert_allclose(
            grpc_predict(s.target, "serving_default"), reference(X), rtol=1e-6
        )
        status, answer = rest_predict(s.rest_port, "serving_default")
        assert status == 200
        np.testing.assert_allclose(answer["predictions"], reference(X), rtol=1e-6)
