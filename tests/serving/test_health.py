"""The gRPC health service: Check and Watch as grpcio's, names forgotten when their streams
close, and no deadlock when many Watch streams open and close at once."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_attn.serving.server import ModelServer

from .conftest import MODEL_NAME

TIMEOUT = 20
Status = health_pb2.HealthCheckResponse


@pytest.fixture
def health_server(model_base_path):
    server = ModelServer(MODEL_NAME, model_base_path, port=0).start()
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield server, channel
    server.stop(grace=1.0)


def wait_for(condition):
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_check_and_watch_answer_like_grpcio(health_server):
    server, channel = health_server
    health = health_pb2_grpc.HealthStub(channel)
    check = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT)
    assert check.status == Status.SERVING
    with pytest.raises(grpc.RpcError) as error:
        health.Check(health_pb2.HealthCheckRequest(service="nope"), timeout=TIMEOUT)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    watch = health.Watch(health_pb2.HealthCheckRequest(service="later"), timeout=TIMEOUT)
    assert next(watch).status == Status.SERVICE_UNKNOWN
    wait_for(lambda: server._health.watched_services() == 1)
    server._health.set("later", Status.SERVING)
    assert next(watch).status == Status.SERVING
    server._health.enter_graceful_shutdown()
    assert next(watch).status == Status.NOT_SERVING
    assert list(watch) == []  # the stream ends (OK) instead of holding a drain open
    assert server._health.watched_services() == 0


def test_closed_watch_streams_leave_no_service_name_behind(health_server):
    server, channel = health_server
    health = health_pb2_grpc.HealthStub(channel)
    for index in range(50):
        watch = health.Watch(health_pb2.HealthCheckRequest(service=f"made-up-{index}"))
        assert next(watch).status == Status.SERVICE_UNKNOWN
        watch.cancel()
    kept = health.Watch(health_pb2.HealthCheckRequest(service=""))
    assert next(kept).status == Status.SERVING
    wait_for(lambda: server._health.watched_services() == 1)  # only the stream still open
    kept.cancel()
    wait_for(lambda: server._health.watched_services() == 0)


def test_a_burst_of_watch_streams_does_not_stall_the_server(health_server):
    server, channel = health_server
    health = health_pb2_grpc.HealthStub(channel)

    answered = []

    def open_and_close(worker):
        for index in range(100):
            name = f"{worker}-{index}-" + "n" * 100_000
            watch = health.Watch(health_pb2.HealthCheckRequest(service=name), timeout=TIMEOUT)
            answered.append(next(watch).status)
            watch.cancel()

    # Daemon threads joined with a bound: a deadlocked server fails the test, not hangs it.
    workers = [threading.Thread(target=open_and_close, args=(w,), daemon=True) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(2 * TIMEOUT)
        assert not worker.is_alive(), "Watch streams stalled: the server is deadlocked"
    assert answered == [Status.SERVICE_UNKNOWN] * 400
    request = predict_pb2.PredictRequest()
    request.model_spec.name = MODEL_NAME
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(["a b"], dtype=tf.string))
    response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
        request, timeout=TIMEOUT
    )
    assert tf.make_ndarray(response.outputs["translation"]).tolist() == [b"b a"]
    wait_for(lambda: server._health.watched_services() == 0)
