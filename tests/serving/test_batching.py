"""Server-side batching as the stock batching session: concurrent requests merged into one model
call and split back, allowed batch sizes, padding, and the stock errors for an oversized task and
a full queue."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_attn.serving.batching import BatchScheduler
from keras_attn.serving.config import BatchingOptions, read_batching_options
from keras_attn.serving.deadline import remaining_seconds, request_deadline
from keras_attn.serving.servable import load_servable
from keras_attn.serving.server import ModelServer
from keras_attn.serving.status import ServingStatus

from .conftest import MODEL_NAME

TIMEOUT = 20


class RecordingFunctions:
    """Signature functions that record each call's batch size; the first call can be held."""

    def __init__(self, functions, hold_first=False):
        self._functions = functions
        self.batch_sizes: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        if not hold_first:
            self.release.set()

    def get(self, key):
        function = self._functions.get(key)

        def run(**tensors):
            self.batch_sizes.append(int(next(iter(tensors.values())).shape[0]))
            self.entered.set()
            assert self.release.wait(TIMEOUT)
            return function(**tensors)

        return run


def request(texts):
    message = predict_pb2.PredictRequest()
    message.model_spec.name = MODEL_NAME
    message.inputs["text"].CopyFrom(tf.make_tensor_proto(list(texts), dtype=tf.string))
    return message


def translations(response):
    return tf.make_ndarray(response.outputs["translation"]).tolist()


@pytest.fixture
def batching_server(model_base_path):
    servers = []

    def start(options, hold_first=False):
        servable = load_servable(MODEL_NAME, model_base_path)
        functions = RecordingFunctions(servable.functions, hold_first)
        server = ModelServer(
            MODEL_NAME,
            model_base_path,
            port=0,
            enable_batching=True,
            batching=options,
            file_system_poll_wait_seconds=0,
            servable=dataclasses.replace(servable, functions=functions),
        ).start()
        servers.append(server)
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        return server, functions, prediction_service_pb2_grpc.PredictionServiceStub(channel)

    yield start
    for server in servers:
        server.stop(grace=1.0)


def wait_for(condition, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_concurrent_requests_are_merged_into_one_call_and_split_back(batching_server):
    options = BatchingOptions(max_batch_size=16, num_batch_threads=1, max_enqueued_batches=4)
    server, functions, stub = batching_server(options, hold_first=True)
    first = stub.Predict.future(request(["x y"]), timeout=TIMEOUT)
    assert functions.entered.wait(TIMEOUT)  # the only batch thread is busy with `first`
    texts = [[f"a{i} b{i}"] * (1 + i % 3) for i in range(6)]  # 1, 2, 3, 1, 2, 3 rows
    futures = [stub.Predict.future(request(t), timeout=TIMEOUT) for t in texts]
    wait_for(lambda: server.manager.scheduler.num_enqueued_tasks() == len(texts))
    functions.release.set()

    assert translations(first.result()) == [b"y x"]
    for text, future in zip(texts, futures, strict=True):
        expected = [" ".join(reversed(t.split())).encode() for t in text]
        assert translations(future.result()) == expected
    # One call for `first`, then one for the 12 rows queued behind it.
    assert functions.batch_sizes == [1, 12]


def test_batches_are_padded_to_allowed_batch_sizes(batching_server):
    options = BatchingOptions(max_batch_size=8, allowed_batch_sizes=(2, 4, 8), num_batch_threads=1)
    server, functions, stub = batching_server(options)
    response = stub.Predict(request(["a b", "c d e"]), timeout=TIMEOUT)
    assert translations(response) == [b"b a", b"e d c"]
    response = stub.Predict(request(["a b c"] * 3), timeout=TIMEOUT)
    assert translations(response) == [b"c b a"] * 3
    assert tf.make_ndarray(response.outputs["tokens"]).shape == (3, 3)
    response = stub.Predict(request([]), timeout=TIMEOUT)
    assert translations(response) == []
    assert functions.batch_sizes == [2, 4, 0]


def test_a_task_over_max_batch_size_is_invalid_argument(batching_server):
    server, functions, stub = batching_server(BatchingOptions(max_batch_size=2))
    with pytest.raises(grpc.RpcError) as error:
        stub.Predict(request(["a", "b", "c"]), timeout=TIMEOUT)
    assert (error.value.code(), error.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Task size 3 is larger than maximum input batch size 2",
    )
    assert translations(stub.Predict(request(["a b"]), timeout=TIMEOUT)) == [b"b a"]


def test_a_full_queue_is_unavailable(batching_server):
    options = BatchingOptions(max_batch_size=2, max_enqueued_batches=1, num_batch_threads=1)
    server, functions, stub = batching_server(options, hold_first=True)
    first = stub.Predict.future(request(["x"]), timeout=TIMEOUT)
    assert functions.entered.wait(TIMEOUT)
    queued = [stub.Predict.future(request(["q"]), timeout=TIMEOUT) for _ in range(2)]
    wait_for(lambda: server.manager.scheduler.num_enqueued_tasks() == 2)
    with pytest.raises(grpc.RpcError) as error:
        stub.Predict(request(["z"]), timeout=TIMEOUT)
    assert (error.value.code(), error.value.details()) == (
        grpc.StatusCode.UNAVAILABLE,
        "The batch scheduling queue to which this task was submitted is full",
    )
    functions.release.set()
    assert translations(first.result()) == [b"x"]
    assert [translations(f.result()) for f in queued] == [[b"q"], [b"q"]]


def _batch_two_tasks(pad: bool):
    """Runs a [1, 2] and a [3, 3] float task in one batch; returns (calls, results)."""
    calls = []
    results = {}

    def run(inputs):
        calls.append({k: v.copy() for k, v in inputs.items()})
        return {"y": inputs["x"].sum(axis=1)}

    scheduler = BatchScheduler(
        BatchingOptions(
            max_batch_size=4, batch_timeout_micros=10_000_000, num_batch_threads=1,
            pad_variable_length_inputs=pad,
        )
    )  # fmt: skip
    queue = scheduler.add_queue(run, {"x": "serving_default_x:0"})

    def send(name, array):
        try:
            results[name] = scheduler.run(queue, {"x": array})
        except ServingStatus as status:
            results[name] = status

    short = threading.Thread(target=send, args=("short", np.array([[1.0, 2.0]], np.float32)))
    long = threading.Thread(target=send, args=("long", np.ones((3, 3), np.float32)))
    short.start()
    wait_for(lambda: scheduler.num_enqueued_tasks() == 1)
    long.start()  # 1 + 3 rows fill the batch: it runs at once
    short.join(TIMEOUT)
    long.join(TIMEOUT)
    scheduler.stop()
    return calls, results


def test_variable_length_inputs_are_padded_with_the_first_element():
    calls, results = _batch_two_tasks(pad=True)
    np.testing.assert_array_equal(calls[0]["x"][0], [1.0, 2.0, 1.0])
    assert results["short"]["y"].tolist() == [4.0]
    assert results["long"]["y"].tolist() == [3.0, 3.0, 3.0]


def test_variable_length_inputs_without_padding_fail_the_batch():
    calls, results = _batch_two_tasks(pad=False)
    assert calls == []
    for name in ("short", "long"):
        assert results[name].code == grpc.StatusCode.INVALID_ARGUMENT
        assert results[name].message == (
            "Tensors with name 'serving_default_x:0' from different tasks have different "
            "shapes and padding is turned off. Set pad_variable_length_inputs to true, or "
            "ensure that all tensors with the same name have equal dimensions starting with "
            "the first dim."
        )


def test_batching_parameters_file(tmp_path):
    path = tmp_path / "batching.txt"
    path.write_text(
        "max_batch_size { value: 8 }\nbatch_timeout_micros { value: 500 }\n"
        "num_batch_threads { value: 2 }\nmax_enqueued_batches { value: 3 }\n"
        "allowed_batch_sizes: 4\nallowed_batch_sizes: 8\npad_variable_length_inputs: true\n"
    )
    assert read_batching_options(str(path)) == BatchingOptions(
        max_batch_size=8,
        batch_timeout_micros=500,
        num_batch_threads=2,
        max_enqueued_batches=3,
        allowed_batch_sizes=(4, 8),
        pad_variable_length_inputs=True,
    )
    path.write_text("max_batch_size { value: 8 }\nallowed_batch_sizes: 4\n")
    with pytest.raises(ServingStatus) as error:
        read_batching_options(str(path))
    assert error.value.message == (
        "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 4; expected 8"
    )
    path.write_text("max_batch_size: 8\n")
    with pytest.raises(ServingStatus) as error:
        read_batching_options(str(path))
    assert error.value.message == f"Invalid protobuf file: '{path}'"


class _HeldScheduler:
    """A one-thread scheduler whose first batch is held until `release` is set; it records the
    rows of every batch it runs and the deadline each batch ran under."""

    def __init__(self, **options):
        self.calls: list[list[float]] = []
        self.deadlines: list[float | None] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.scheduler = BatchScheduler(BatchingOptions(num_batch_threads=1, **options))
        self.queue = self.scheduler.add_queue(self._run, {"x": "serving_default_x:0"})

    def _run(self, inputs):
        self.calls.append(inputs["x"].tolist())
        self.deadlines.append(remaining_seconds())
        self.entered.set()
        assert self.release.wait(TIMEOUT)
        return {"y": inputs["x"] * 2}

    def send(self, value, deadline=None):
        """Runs one one-row task (with a deadline in seconds) on a thread; returns a future."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run():
            try:
                with request_deadline(deadline):
                    future.set_result(self.scheduler.run(self.queue, {"x": np.array([value])}))
            except BaseException as error:  # noqa: BLE001  (handed to the test)
                future.set_exception(error)

        threading.Thread(target=run, daemon=True).start()
        return future


def test_a_queued_task_whose_deadline_passed_is_dropped_before_it_runs():
    held = _HeldScheduler(max_batch_size=4)
    first = held.send(1.0)
    assert held.entered.wait(TIMEOUT)
    late = held.send(2.0, deadline=0.3)
    with pytest.raises(ServingStatus) as error:
        late.result(TIMEOUT)
    assert error.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    held.release.set()
    assert first.result(TIMEOUT)["y"].tolist() == [2.0]
    assert held.send(3.0).result(TIMEOUT)["y"].tolist() == [6.0]
    held.scheduler.stop()
    assert held.calls == [[1.0], [3.0]]  # the expired task never ran


def test_a_batch_runs_until_the_latest_deadline_of_its_tasks():
    held = _HeldScheduler(max_batch_size=2, batch_timeout_micros=10_000_000)
    held.release.set()
    soon, later = held.send(1.0, deadline=TIMEOUT / 2), held.send(2.0, deadline=TIMEOUT)
    assert [soon.result(TIMEOUT)["y"].tolist(), later.result(TIMEOUT)["y"].tolist()] == [
        [2.0],
        [4.0],
    ]
    bounded, unbounded = held.send(1.0, deadline=TIMEOUT / 2), held.send(2.0)
    assert [bounded.result(TIMEOUT)["y"].tolist(), unbounded.result(TIMEOUT)["y"].tolist()] == [
        [2.0],
        [4.0],
    ]
    held.scheduler.stop()
    assert [sorted(call) for call in held.calls] == [[1.0, 2.0], [1.0, 2.0]]
    assert TIMEOUT / 2 < held.deadlines[0] <= TIMEOUT
    assert held.deadlines[1] is None  # one task without a deadline: the batch has none


def test_cancel_queued_fails_the_tasks_waiting_for_a_batch():
    held = _HeldScheduler(max_batch_size=1)
    first = held.send(1.0)
    assert held.entered.wait(TIMEOUT)
    waiting = [held.send(float(i)) for i in range(2, 5)]
    wait_for(lambda: held.scheduler.num_enqueued_tasks() == 3)
    held.scheduler.cancel_queued(ServingStatus(grpc.StatusCode.UNAVAILABLE, "shutting down"))
    for future in waiting:
        with pytest.raises(ServingStatus) as error:
            future.result(TIMEOUT)
        assert (error.value.code, error.value.message) == (
            grpc.StatusCode.UNAVAILABLE,
            "shutting down",
        )
    assert held.scheduler.num_enqueued_tasks() == 0
    held.release.set()
    assert first.result(TIMEOUT)["y"].tolist() == [2.0]
    held.scheduler.stop()
    assert held.calls == [[1.0]]
