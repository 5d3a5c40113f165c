"""Hostile clients against `keras-attn serve` in a child process.

Each test sends one class of hostile input and asserts the status every request gets and that
the server stays bounded: its resident memory (`/proc/PID/status`), the CPU it spends after
the requests' deadlines (`/proc/PID/stat`), the latency of the next good request, and, for the
signals, that it exits 0 within its drain time. Every loop is bounded in count and time.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_attn.serving.limits import RequestLimits
from keras_attn.serving.tensors import ndarray_to_tensor_proto

from .conftest import MODEL_NAME
from .test_tensors import DTYPES

TIMEOUT = 30
LIMITS = RequestLimits()
RSS_BOUND_BYTES = 50 * 2**20  # what all the small requests of one test may add
DRAIN_S = 10.0  # keras-attn serve's drain time
FOREVER = "1000000000"  # spinner steps: hours of work unless cancelled
READY = re.compile(r"^Serving .* on 127\.0\.0\.1:(\d+) \(gRPC\)(?:, REST on 127\.0\.0\.1:(\d+))?$")


# ---------------------------------------------------------------------- the server process


class ServerProcess:
    """`keras-attn serve ARGS` in a child process, ready once it prints its ports."""

    def __init__(self, *args: str, ready: bool = True):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
        command = [sys.executable, "-m", "keras_attn.cli", "serve", "--port", "0", *args]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.pid = self.process.pid
        self.lines: queue.Queue = queue.Queue()
        self.errors: list[str] = []
        threading.Thread(
            target=self._read, args=(self.process.stdout, self.lines), daemon=True
        ).start()
        threading.Thread(target=self._collect, daemon=True).start()
        self.port = self.rest_port = None
        if ready:
            line = self.lines.get(timeout=120)
            match = READY.match(line or "")
            assert match, f"{line!r}: {self.stderr_text()}"
            self.port = int(match.group(1))
            self.rest_port = int(match.group(2)) if match.group(2) else None

    @staticmethod
    def _read(stream, lines: queue.Queue) -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def _collect(self) -> None:
        for line in self.process.stderr:
            self.errors.append(line.rstrip("\n"))

    def stderr_text(self) -> str:
        return "\n".join(self.errors[-40:])

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def rss(self) -> int:
        """Resident memory in bytes."""
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the whole process (every thread)."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()
        self.process.stderr.close()


def write_config(path, models) -> str:
    entries = "".join(
        f'  config {{ name: "{name}" base_path: "{base}" model_platform: "tensorflow" }}\n'
        for name, base in models
    )
    path.write_text(f"model_config_list {{\n{entries}}}\n")
    return str(path)


class AllDtypes(tf.Module):
    """One signature per dtype a request may carry: `echo_<dtype>`, input `x` of shape
    [-1, -1], outputs its element count and rows."""


def dtype_key(dtype: int) -> str:
    return "echo_" + types_pb2.DataType.Name(dtype)[3:].lower()


@pytest.fixture(scope="module")
def dtypes_base_path(tmp_path_factory) -> str:
    module = AllDtypes()
    signatures = {}
    for dtype in [types_pb2.DT_STRING] + [d for d, _, _ in DTYPES]:

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.as_dtype(dtype), name="x")])
        def echo(x):
            return {"size": tf.size(x, out_type=tf.int64), "rows": tf.shape(x, tf.int64)[0]}

        signatures[dtype_key(dtype)] = echo
    base = tmp_path_factory.mktemp("models") / "dtypes"
    tf.saved_model.save(module, str(base / "1"), signatures=signatures)
    return str(base)


@pytest.fixture(scope="module")
def served(tmp_path_factory, model_base_path, spinner_base_path, dtypes_base_path):
    """translator + spinner + dtypes, REST with a 1 s timeout, Prometheus metrics."""
    folder = tmp_path_factory.mktemp("adversarial")
    config = write_config(
        folder / "models.config",
        [
            (MODEL_NAME, model_base_path),
            ("spinner", spinner_base_path),
            ("dtypes", dtypes_base_path),
        ],
    )
    monitoring = folder / "monitoring.config"
    monitoring.write_text("prometheus_config { enable: true }\n")
    server = ServerProcess(
        "--rest_api_port", str(free_port()), "--model_config_file", config,
        "--monitoring_config_file", str(monitoring), "--rest_api_timeout_in_ms", "1000",
        "--file_system_poll_wait_seconds", "0",
    )  # fmt: skip
    yield server
    server.close()


@pytest.fixture(scope="module")
def stub(served):
    with grpc.insecure_channel(served.target) as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------------- requests


def predict(model=MODEL_NAME, signature="", key="text", proto=None, texts=("a b",)):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    if proto is None:
        proto = tf.make_tensor_proto(list(texts), dtype=tf.string)
    request.inputs[key].CopyFrom(proto)
    return request


def declared(dtype: int, dims, values=()) -> tensor_pb2.TensorProto:
    """A proto declaring `dims` and carrying `values` (in the dtype's typed field)."""
    if values:
        numpy_dtype = (
            object if dtype == types_pb2.DT_STRING else dict((d, n) for d, n, _ in DTYPES)[dtype]
        )
        proto = ndarray_to_tensor_proto(np.array(values).astype(numpy_dtype), dtype)
        del proto.tensor_shape.dim[:]
    else:
        proto = tensor_pb2.TensorProto(dtype=dtype)
    for size in dims:
        proto.tensor_shape.dim.add(size=size)
    return proto


def status_of(call, request, timeout=TIMEOUT):
    """(code, details) of a call; OK with the response for a success."""
    try:
        return grpc.StatusCode.OK, call(request, timeout=timeout)
    except grpc.RpcError as error:
        return error.code(), error.details()


def rest(server, method, path, body=b"", headers=None, timeout=TIMEOUT):
    """(HTTP status, parsed JSON body) of a REST request."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.rest_port}{path}", data=body or None, method=method,
        headers=headers or {},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def good_request_seconds(stub) -> float:
    started = time.monotonic()
    response = stub.Predict(predict(texts=["one two"]), timeout=TIMEOUT)
    assert tf.make_ndarray(response.outputs["translation"]).tolist() == [b"two one"]
    return time.monotonic() - started


def settle_rss(server, rounds=3) -> int:
    """RSS after a few good requests (allocator caches warmed)."""
    with grpc.insecure_channel(server.target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        for _ in range(rounds):
            good_request_seconds(stub)
    return server.rss()


# ---------------------------------------------------------------------- shape and dtype bombs

INVALID, EXHAUSTED = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED
ALL_DTYPES = [types_pb2.DT_STRING] + [d for d, _, _ in DTYPES]


def test_shape_and_dtype_bombs_on_every_dtype_cost_nothing(served, stub):
    for dtype in ALL_DTYPES:  # legitimate requests first: every signature warmed up
        value = "x" if dtype == types_pb2.DT_STRING else 1
        code, response = status_of(
            stub.Predict, predict("dtypes", dtype_key(dtype), "x", declared(dtype, [2, 3], [value]))
        )
        assert code == grpc.StatusCode.OK, response
        assert tf.make_ndarray(response.outputs["size"]) == 6
    before = settle_rss(served)
    cases = 0
    for dtype in ALL_DTYPES:
        value = "x" if dtype == types_pb2.DT_STRING else 1
        key = dtype_key(dtype)
        bombs = [
            # Rows over --max_rows_per_request, no values at all.
            (
                declared(dtype, [10_000_000, 1]),
                EXHAUSTED,
                "rows, more than the server's limit of 1024",
            ),
            # One value declared a billion times (and 2^62 times): filling is capped.
            (declared(dtype, [1, 1_000_000_000], [value]), EXHAUSTED, "(--max_fill_bytes)"),
            (declared(dtype, [1, 2**31, 2**31], [value]), INVALID, "expects shape [-1,-1]"),
            (declared(dtype, [4, 2**40], [value]), EXHAUSTED, "(--max_fill_bytes)"),
            # A rank the signature does not take: refused before anything is built.
            (declared(dtype, [1_000_000_000]), INVALID, "has shape [1000000000] but signature"),
        ]
        for proto, code, message in bombs:
            request = predict("dtypes", key, "x", proto)
            assert request.ByteSize() < 1024
            got, details = status_of(stub.Predict, request)
            assert (got, message in details) == (code, True), (key, details)
            cases += 1
        # A wrong dtype declared huge, against the translator: the dtype check comes first.
        bomb = predict(
            proto=declared(
                dtype if dtype != types_pb2.DT_STRING else types_pb2.DT_INT32, [10**9], [1]
            )
        )
        got, details = status_of(stub.Predict, bomb)
        assert got == INVALID and "Expects arg[0] to be string but" in details, details
        # A legitimate fill (TensorFlow's compressed protos): 1000 elements from one value.
        code, response = status_of(
            stub.Predict, predict("dtypes", key, "x", declared(dtype, [1, 1000], [value]))
        )
        assert code == grpc.StatusCode.OK, response
        assert tf.make_ndarray(response.outputs["size"]) == 1000
        cases += 2
    # The translator's own bombs, as first reported: ten million empty strings in 35 bytes.
    strings = predict(proto=declared(types_pb2.DT_STRING, [10_000_000]))
    got, details = status_of(stub.Predict, strings)
    assert got == EXHAUSTED and "has 10000000 rows" in details
    assert good_request_seconds(stub) < 5
    grown = served.rss() - before
    assert cases == 7 * len(ALL_DTYPES)
    assert grown < RSS_BOUND_BYTES, f"RSS grew by {grown / 2**20:.0f} MiB"


def test_strings_and_requests_over_their_caps(served, stub):
    long_string = predict(texts=["x" * (LIMITS.max_string_bytes + 1)])
    got, details = status_of(stub.Predict, long_string)
    assert got == EXHAUSTED and "(--max_string_bytes)" in details
    rows = predict(texts=["a"] * (LIMITS.max_rows_per_request + 1))
    got, details = status_of(stub.Predict, rows)
    assert got == EXHAUSTED and "(--max_rows_per_request)" in details
    got, _ = status_of(stub.Predict, predict(texts=["a"] * LIMITS.max_rows_per_request))
    assert got == grpc.StatusCode.OK
    # Over --max_request_bytes: gRPC refuses the message before it is parsed.
    huge = predict(texts=["y" * 60_000] * 300)
    assert huge.ByteSize() > LIMITS.max_request_bytes
    got, details = status_of(stub.Predict, huge)
    assert got == EXHAUSTED and "Received message larger than max" in details
    assert good_request_seconds(stub) < 5


# ---------------------------------------------------------------------- JSON


def nested(depth: int, leaf: str = '"a"') -> bytes:
    return ("[" * depth + leaf + "]" * depth).encode()


P = f"/v1/models/{MODEL_NAME}:predict"
CLASSIFY, REGRESS = f"/v1/models/{MODEL_NAME}:classify", f"/v1/models/{MODEL_NAME}:regress"
BIG_VERSION = "99999999999999999999999"
DIGITS = "9" * 5000
TOO_DEEP = "nested more than 64"
TOO_BIG = "Number too big"


def instances(text: str | bytes) -> bytes:
    text = text.encode() if isinstance(text, str) else text
    return b'{"instances": ' + text + b"}"


JSON_CASES = [
    ("array nested 10,000 deep", P, instances(nested(10_000)), TOO_DEEP),
    ("object nested 10,000 deep", P, ('{"a":' * 10_000 + "1" + "}" * 10_000).encode(), TOO_DEEP),
    ("instances nested 900 deep", P, instances(nested(900)), TOO_DEEP),
    ("instances nested 65 deep", P, instances(nested(64)), TOO_DEEP),
    ("instances nested 20 deep", P, instances(nested(19)), "expects shape [-1]"),
    ("5000-digit number", P, instances(f"[{DIGITS}]"), TOO_BIG),
    ("5000-digit signature", P, f'{{"signature_name": {DIGITS}}}'.encode(), TOO_BIG),
    ("huge float", P, instances("[1e99999]"), "is not of expected type: string"),
    ("NaN", P, instances("[NaN]"), "is not of expected type: string"),
    ("top-level array", P, b"[1, 2]", "Is not object"),
    ("top-level string", P, b'"x"', "Is not object"),
    ("top-level number", P, b"5", "Is not object"),
    ("top-level null", P, b"null", "Is not object"),
    ("trailing garbage", P, instances('["a"]') + b" x", "JSON Parse error"),
    ("lone surrogate key", P, b'{"\\udcff": 1}', "Missing 'inputs' or 'instances' key"),
    ("version beyond int64", f"/v1/models/{MODEL_NAME}/versions/{BIG_VERSION}:predict",
     instances('["a"]'), f"Failed to convert version: {BIG_VERSION} to numeric."),
    ("status of a version beyond int64", f"/v1/models/{MODEL_NAME}/versions/{BIG_VERSION}",
     b"", "Failed to convert version"),
    ("b64 not a string", P, instances('[{"b64": 5}]'), "does not have named input: b64"),
    ("classify nested", CLASSIFY, b'{"examples": ' + nested(900, "{}") + b"}", TOO_DEEP),
    ("regress 5000 digits", REGRESS, f'{{"examples": [{{"x": {DIGITS}}}]}}'.encode(), TOO_BIG),
]  # fmt: skip


def test_every_malformed_json_body_gets_a_json_400(served, stub):
    before = settle_rss(served)
    for name, path, body, message in JSON_CASES:
        method = "POST" if body else "GET"
        status, answer = rest(served, method, path, body)
        assert status == 400, (name, answer)
        assert set(answer) == {"error"} and message in answer["error"], (name, answer)
        assert len(answer["error"]) <= 1024 + len("...TRUNCATED"), name
        for leak in ("Traceback", "keras_attn", "site-packages", "Error:  File"):
            assert leak not in answer["error"], (name, answer)
    assert good_request_seconds(stub) < 5
    grown = served.rss() - before
    assert grown < RSS_BOUND_BYTES, f"RSS grew by {grown / 2**20:.0f} MiB"


def mutations(seed: int, count: int):
    """`count` corruptions of valid predict bodies: cuts, bit flips, splices, and strings
    wrapped in arrays or objects up to 5,000 levels deep."""
    rng = random.Random(seed)
    valid = [
        b'{"instances": ["a b", "c"]}',
        b'{"inputs": {"text": ["a"]}, "signature_name": "translate"}',
        b'{"instances": [{"b64": "YSBi"}], "signature_name": "translate_with_alignment"}',
        b'{"signature_name": "serving_default", "instances": ["x"]}',
    ]
    pieces = [b"[", b"]", b"{", b"}", b'"', b"\\", b",", b":", b"\xff", b"\x00", b"1e400", b"-"]
    pieces += [b"null", b"\\u0000", b"9" * 5000]
    for _ in range(count):
        body = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 4)):
            kind = rng.randrange(5)
            at = rng.randrange(len(body) + 1)
            if kind == 0:
                del body[at:]
            elif kind == 1 and body:
                body[min(at, len(body) - 1)] ^= 1 << rng.randrange(8)
            elif kind == 2:
                body[at:at] = rng.choice(pieces)
            elif kind == 3:
                body[at:at] = rng.choice(pieces) * rng.randint(50, 3000)
            else:  # wrap one string value in `depth` arrays / objects, balanced
                strings = list(re.finditer(rb'"[^"]*"', bytes(body)))
                if strings:
                    value = rng.choice(strings)
                    depth = rng.choice([2, 10, 63, 64, 65, 500, 999, 5000])
                    opener, closer = rng.choice([(b"[", b"]"), (b'{"k":', b"}")])
                    body[value.end() : value.end()] = closer * depth
                    body[value.start() : value.start()] = opener * depth
        yield bytes(body)


def test_fuzzed_bodies_always_get_a_json_answer_and_never_a_500(served, stub):
    statuses = {}
    for body in mutations(seed=17, count=300):
        status, answer = rest(served, "POST", P, body)
        assert status in (200, 400, 404), (body[:200], status, answer)
        expected = ({"predictions"}, {"outputs"}) if status == 200 else ({"error"},)
        assert set(answer) in expected, (body[:200], status, answer)
        statuses[status] = statuses.get(status, 0) + 1
    assert statuses.get(400, 0) > 100  # most corruptions are refused, not all
    assert good_request_seconds(stub) < 5


EXTREMES = [2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), 2**31, -(2**31) - 1, 70_000, 256, -1]
EXTREMES += [3.5, 1e308, -1e308, 1e-320, "x", True, None, [], {}, {"b64": "AA=="}]


def test_extreme_values_for_every_dtype_never_get_a_500(served, stub):
    statuses = {}
    for dtype in ALL_DTYPES:
        for value in EXTREMES:
            body = json.dumps({"signature_name": dtype_key(dtype), "inputs": [[value]]})
            status, answer = rest(served, "POST", "/v1/models/dtypes:predict", body.encode())
            assert status in (200, 400, 501), (dtype_key(dtype), value, status, answer)
            assert set(answer) == ({"outputs"} if status == 200 else {"error"})
            statuses[status] = statuses.get(status, 0) + 1
    for value in EXTREMES:
        for path in (CLASSIFY, REGRESS):
            status, answer = rest(
                served, "POST", path, json.dumps({"examples": [{"x": value}]}).encode()
            )
            assert status == 400 and set(answer) == {"error"}, (path, value, answer)
    assert statuses.get(200, 0) > 20 and statuses.get(400, 0) > 20  # both kinds exercised
    assert good_request_seconds(stub) < 5


def test_a_body_over_the_limit_is_refused_before_it_is_read(served):
    with socket.create_connection(("127.0.0.1", served.rest_port), timeout=TIMEOUT) as sock:
        sock.sendall(
            f"POST {P} HTTP/1.1\r\nHost: x\r\nContent-Length: {LIMITS.max_request_bytes + 1}\r\n"
            "\r\n".encode()
        )
        answer = sock.makefile("rb").read()  # the server answers and closes: no body was sent
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].startswith(b"HTTP/1.1 413"), head
    assert set(json.loads(body)) == {"error"}


# ---------------------------------------------------------------------- deadlines


def spin_request(steps: str) -> predict_pb2.PredictRequest:
    return predict("spinner", texts=[steps])


def idle_cpu(server, seconds: float = 2.0) -> float:
    """CPU seconds the server spends over `seconds` of wall time."""
    start = server.cpu_seconds()
    time.sleep(seconds)
    return server.cpu_seconds() - start


def test_abandoned_heavy_requests_stop_using_the_cpu(served, stub):
    baseline = min(good_request_seconds(stub) for _ in range(5))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        abandoned = [
            pool.submit(status_of, stub.Predict, spin_request(FOREVER), 0.5) for _ in range(3)
        ]
        timed_out = [
            pool.submit(
                rest,
                served,
                "POST",
                "/v1/models/spinner:predict",
                json.dumps({"instances": [FOREVER]}).encode(),
            )
            for _ in range(2)
        ]
        storm = [
            pool.submit(status_of, stub.Predict, predict(texts=["a b"] * 200), 0.001)
            for _ in range(100)
        ]
        for future in abandoned:
            assert future.result()[0] == grpc.StatusCode.DEADLINE_EXCEEDED
        for future in timed_out:  # --rest_api_timeout_in_ms 1000
            status, answer = future.result()
            assert status == 504 and set(answer) == {"error"}, answer
        codes = {future.result()[0] for future in storm}
        assert codes <= {grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.OK}
    time.sleep(0.5)  # let the last cancellations land
    spent = idle_cpu(served)
    assert spent < 0.5, f"the server spent {spent:.2f} CPU s after every deadline had passed"
    assert good_request_seconds(stub) < baseline + 1.0


@pytest.fixture(scope="module")
def batching_served(tmp_path_factory, spinner_base_path):
    folder = tmp_path_factory.mktemp("batching")
    batching = folder / "batching.txt"
    batching.write_text(
        "max_batch_size { value: 8 }\nbatch_timeout_micros { value: 1000 }\n"
        "num_batch_threads { value: 1 }\nmax_enqueued_batches { value: 100 }\n"
    )
    server = ServerProcess(
        "--model_name", "spinner", "--model_base_path", spinner_base_path,
        "--enable_batching", "--batching_parameters_file", str(batching),
        "--file_system_poll_wait_seconds", "0",
    )  # fmt: skip
    yield server
    server.close()


def test_abandoned_batches_free_the_batch_thread(batching_served):
    with grpc.insecure_channel(batching_served.target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            heavy = [
                pool.submit(status_of, stub.Predict, spin_request(FOREVER), 0.5) for _ in range(3)
            ]
            # Queued behind them on the one batch thread, with deadlines that pass in the queue.
            storm = [
                pool.submit(status_of, stub.Predict, spin_request("10"), 0.05) for _ in range(40)
            ]
            assert {f.result()[0] for f in heavy} == {grpc.StatusCode.DEADLINE_EXCEEDED}
            assert {f.result()[0] for f in storm} <= {
                grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.OK,
            }
        time.sleep(0.5)
        spent = idle_cpu(batching_served)
        assert spent < 0.5, f"the server spent {spent:.2f} CPU s after every deadline had passed"
        started = time.monotonic()
        code, response = status_of(stub.Predict, spin_request("5"))
        assert code == grpc.StatusCode.OK and tf.make_ndarray(
            response.outputs["steps"]
        ).tolist() == [5]
        assert time.monotonic() - started < 2.0


# ---------------------------------------------------------------------- name floods


def test_floods_of_made_up_names_leave_memory_flat(served, stub):
    before = settle_rss(served)
    rng = random.Random(3)

    def name(size):
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(16)) * (size // 16)

    for _ in range(600):
        got, _ = status_of(stub.Predict, predict(model=name(100_000)))
        assert got == grpc.StatusCode.NOT_FOUND
        got, _ = status_of(stub.Predict, predict(signature=name(100_000)))
        assert got == grpc.StatusCode.FAILED_PRECONDITION
    for _ in range(200):
        status, _ = rest(
            served, "POST", f"/v1/models/{name(8_000)}:predict", b'{"instances": ["a"]}'
        )
        assert status == 404
        body = json.dumps({"signature_name": name(50_000), "instances": ["a"]}).encode()
        assert rest(served, "POST", P, body)[0] == 400
    with grpc.insecure_channel(served.target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for _ in range(600):
            watch = health.Watch(
                health_pb2.HealthCheckRequest(service=name(100_000)), timeout=TIMEOUT
            )
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
            watch.cancel()
    grown = served.rss() - before
    assert grown < RSS_BOUND_BYTES, f"RSS grew by {grown / 2**20:.0f} MiB"
    with urllib.request.urlopen(
        f"http://127.0.0.1:{served.rest_port}/monitoring/prometheus/metrics", timeout=TIMEOUT
    ) as answer:
        page = answer.read().decode()
    assert ':tensorflow:serving:request_count{model_name="<unknown>",status="NOT_FOUND"}' in page
    assert 'model_name="translator",signature_name="<unknown>"' in page
    # Labels only name what the server serves.
    served_signatures = {"serving_default", "translate", "translate_with_alignment"}
    served_signatures |= {dtype_key(dtype) for dtype in ALL_DTYPES}
    assert set(re.findall(r'model_name="([^"]*)"', page)) <= {
        MODEL_NAME,
        "spinner",
        "dtypes",
        "<unknown>",
    }
    assert set(re.findall(r'signature_name="([^"]*)"', page)) <= served_signatures | {"<unknown>"}


# ---------------------------------------------------------------------- shutdown


def trickle(port: int, stop: threading.Event, body: bool) -> None:
    """A client that sends its request one byte every 0.2 s (headers, or a promised body)."""
    request = f"POST {P} HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n".encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
            if body:
                sock.sendall(request + b'{"instances": [')
                request = b'"a",' * 10_000
            for byte in request:
                if stop.wait(0.2):
                    return
                sock.sendall(bytes([byte]))
    except OSError:
        return


@pytest.mark.parametrize("endless", [False, True], ids=["short run", "endless run"])
def test_sigterm_with_slow_half_open_and_idle_connections_exits_within_the_drain(
    tmp_path, model_base_path, spinner_base_path, endless
):
    config = write_config(
        tmp_path / "models.config", [(MODEL_NAME, model_base_path), ("spinner", spinner_base_path)]
    )
    server = ServerProcess(
        "--rest_api_port", str(free_port()), "--model_config_file", config,
        "--file_system_poll_wait_seconds", "0",
    )  # fmt: skip
    stop = threading.Event()
    sockets = []
    try:
        for body in (False, True) * 3:
            threading.Thread(
                target=trickle, args=(server.rest_port, stop, body), daemon=True
            ).start()
        for port in (server.rest_port, server.port):
            for _ in range(3):  # idle connections
                sockets.append(socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT))
        half = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
        half.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n")  # half an HTTP/2 preface
        sockets.append(half)
        with grpc.insecure_channel(server.target) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            assert good_request_seconds(stub) < 10
            # In flight when the signal comes: a short run (it finishes), and maybe an endless one
            # (cancelled once the drain time is over). The slow clients hold nothing open.
            short = stub.Predict.future(spin_request("300000"), timeout=60)
            forever = stub.Predict.future(spin_request(FOREVER), timeout=120) if endless else None
            time.sleep(0.3)
            started = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            # A server that never cancels the endless run would not exit for hours.
            assert server.process.wait(timeout=DRAIN_S + 30) == 0, server.stderr_text()
            took = time.monotonic() - started
            if endless:
                # The run in flight was given the whole drain time before it was cancelled.
                assert took >= DRAIN_S, f"exit took {took:.1f} s"
            else:
                # Held open by a slow client, the server would exit only when the drain time ran
                # out; it exits before that, once the short run has answered.
                assert took < DRAIN_S, f"exit took {took:.1f} s"
            assert tf.make_ndarray(short.result(timeout=5).outputs["steps"]).tolist() == [300000]
            if endless:
                with pytest.raises(grpc.RpcError):
                    forever.result(timeout=5)
        assert "Stopped serving" in "\n".join(iter(lambda: server.lines.get(timeout=5), None))
    finally:
        stop.set()
        for sock in sockets:
            sock.close()
        server.close()


def exit_after_signal(server, logged: str, signum: int) -> float:
    """Waits for the server to log `logged`, sends `signum`, checks it exits 0; the seconds the
    exit took."""
    deadline = time.monotonic() + 60
    while not any(logged in line for line in server.errors):
        assert time.monotonic() < deadline and server.process.poll() is None, server.stderr_text()
        time.sleep(0.1)
    started = time.monotonic()
    server.process.send_signal(signum)
    assert server.process.wait(timeout=10) == 0, server.stderr_text()
    return time.monotonic() - started


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_waiting_for_a_model_stops_the_start_up(tmp_path, signum):
    missing = tmp_path / "not-yet"
    server = ServerProcess("--model_name", "late", "--model_base_path", str(missing), ready=False)
    try:
        assert exit_after_signal(server, "Could not find base path", signum) < 5
        assert server.lines.get(timeout=5) == "Stopped before serving (interrupted while loading)."
    finally:
        server.close()


def test_a_signal_between_load_retries_stops_the_start_up(tmp_path):
    base = tmp_path / "broken"
    (base / "1").mkdir(parents=True)
    (base / "1" / "saved_model.pb").write_bytes(b"\x00 not a SavedModel")
    server = ServerProcess(
        "--model_name", "broken", "--model_base_path", str(base),
        "--max_num_load_retries", "5", "--load_retry_interval_micros", "60000000", ready=False,
    )  # fmt: skip
    try:
        assert exit_after_signal(server, "Retry 1 of 5", signal.SIGTERM) < 5
        assert server.lines.get(timeout=5) == "Stopped before serving (interrupted while loading)."
    finally:
        server.close()
