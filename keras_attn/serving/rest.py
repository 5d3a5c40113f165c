"""TensorFlow Serving's REST API, on the bounded HTTP server of `keras_attn.serving.http_server`.

Routes (paths are case-insensitive, as stock):

    GET  /v1/models/NAME[/versions/V | /labels/L]            model status
    GET  /v1/models/NAME[/versions/V | /labels/L]/metadata   model metadata (signature_def)
    POST /v1/models/NAME[/versions/V | /labels/L]:predict    {"instances": [...]} or {"inputs": ...}
    POST /v1/models/NAME[/versions/V | /labels/L]:classify   {"examples": [...], "context": {...}}
    POST /v1/models/NAME[/versions/V | /labels/L]:regress    same as classify

Failures answer `{"error": "<message>"}` with the HTTP code stock TensorFlow Serving maps the gRPC
status to; every malformed body gets a 400, never a dropped connection or a 500. The bodies are
read and written by `keras_attn.serving.rest_json`; routing follows tensorflow/serving
`model_servers/http_rest_api_handler.cc`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import grpc
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_pb2,
    predict_pb2,
    regression_pb2,
)

from keras_attn.serving.core import DEFAULT_SIGNATURE, SIGNATURE_DEF_FIELD, ServingCore
from keras_attn.serving.deadline import request_deadline
from keras_attn.serving.http_server import HttpRequest, HttpResponse, HttpServer
from keras_attn.serving.limits import RequestLimits
from keras_attn.serving.metrics import Metrics
from keras_attn.serving.rest_json import (
    INT64_MAX,
    classification_result_to_json,
    fill_examples_request_from_json,
    fill_predict_request_from_json,
    message_to_json,
    model_metadata_to_json,
    predict_response_to_json,
    regression_result_to_json,
)
from keras_attn.serving.status import INTERNAL_ERROR_MESSAGE, ServingStatus, invalid_argument

logger = logging.getLogger(__name__)

_HANDLED_PATH = re.compile(r"/v1/.*", re.IGNORECASE)
_PREDICTION_PATH = re.compile(
    r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)",
    re.IGNORECASE,
)
_STATUS_PATH = re.compile(
    r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?",
    re.IGNORECASE,
)
DEFAULT_REST_TIMEOUT_S = 30.0  # stock --rest_api_timeout_in_ms=30000
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclasses.dataclass
class _Call:
    """What a REST request names, for its metrics (filled in as the request is parsed)."""

    api: str | None = None
    model_name: str = ""
    signature_name: str = DEFAULT_SIGNATURE


class RestApi:
    """Answers REST requests from a `ServingCore` (transport-free: method, path, body in).

    Args:
        core: the request logic; its `limits` cap each body's JSON nesting.
        metrics: where predict/classify/regress requests are counted (None: not counted).
        timeout_seconds: each request's deadline (stock `--rest_api_timeout_in_ms`, 30 s),
            passed on to the model run as the stock handler's `RunOptions` timeout.
        prometheus_path: with `metrics`, `GET <prometheus_path>` answers the metrics in the
            Prometheus text format (stock `http_server.cc` serves them at the
            `MonitoringConfig` path).
    """

    def __init__(
        self,
        core: ServingCore,
        metrics: Metrics | None = None,
        timeout_seconds: float | None = DEFAULT_REST_TIMEOUT_S,
        prometheus_path: str | None = None,
    ):
        self._core = core
        self._metrics = metrics
        self._timeout = timeout_seconds
        self._prometheus_path = prometheus_path if metrics is not None else None
        # The caps of the core (the defaults where it has none): JSON depth here, body size in
        # the HTTP server.
        self.limits = core.limits or RequestLimits()
        self._max_depth = self.limits.max_json_depth

    def respond(self, request: HttpRequest) -> HttpResponse:
        """The HTTP response to a request (a JSON body, or the metrics page)."""
        path = urlsplit(request.target).path
        if request.method == "GET" and self._prometheus_path and path == self._prometheus_path:
            page = self._metrics.exposition().encode("utf-8")
            return HttpResponse(200, page, PROMETHEUS_CONTENT_TYPE)
        answer = self.handle(request.method, path, request.body)
        if answer is None:
            error = ServingStatus(grpc.StatusCode.NOT_FOUND, f"Not found: {request.method} {path}")
            answer = 404, {"error": error.grpc_message}
        status, payload = answer
        data = (json.dumps(payload, indent=4, ensure_ascii=False) + "\n").encode("utf-8")
        return HttpResponse(status, data)

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, Any] | None:
        """Returns (HTTP status, JSON-able body), or None for a path outside the API (404).

        A failure is `{"error": message}` with the HTTP status of its gRPC code; the message
        is cut after 1024 characters, and one that is the server's fault (HTTP 500) carries no
        exception text.
        """
        if not _HANDLED_PATH.fullmatch(path):
            return None
        start = time.perf_counter()
        code = grpc.StatusCode.OK
        call = _Call()
        try:
            with request_deadline(self._timeout):
                return 200, self._dispatch(method, path, body, call)
        except ServingStatus as status:
            code = status.code
            return status.http_status, {"error": status.grpc_message}
        except Exception:  # Never let a bad request take the server down.
            code = grpc.StatusCode.INTERNAL
            logger.exception("REST request failed")
            return 500, {"error": INTERNAL_ERROR_MESSAGE}
        finally:
            if self._metrics is not None and call.api is not None:
                name, signature = self._core.metric_labels(call.model_name, call.signature_name)
                latency = time.perf_counter() - start
                self._metrics.record(name, signature, call.api, "REST", code.name, latency)

    def _dispatch(self, method: str, path: str, body: bytes, call: _Call) -> Any:
        malformed = invalid_argument(f"Malformed request: {method} {path}")
        pattern = {"POST": _PREDICTION_PATH, "GET": _STATUS_PATH}.get(method)
        match = pattern.fullmatch(path) if pattern else None
        if match is None:
            raise malformed
        name = unquote(match.group(1) or "")
        spec = model_pb2.ModelSpec(name=name)
        if match.group(2):
            version = int(match.group(2))
            if version > INT64_MAX:
                raise invalid_argument(f"Failed to convert version: {match.group(2)} to numeric.")
            spec.version.value = version
        if match.group(3):
            spec.version_label = unquote(match.group(3))
        if method == "POST":
            verb = match.group(4).lower()
            call.api, call.model_name = verb.capitalize(), name
            if verb == "predict":
                return self._predict(spec, body, call)
            if verb == "classify":
                return self._classify(spec, body, call)
            return self._regress(spec, body, call)
        if not name:
            raise invalid_argument("Missing model name in request.")
        if match.group(4):
            return self._metadata(spec)
        request = get_model_status_pb2.GetModelStatusRequest(model_spec=spec)
        return message_to_json(self._core.get_model_status(request))

    def _predict(self, spec: model_pb2.ModelSpec, body: bytes, call: _Call) -> Any:
        request = predict_pb2.PredictRequest(model_spec=spec)

        def get_inputs(signature_name: str) -> Mapping[str, meta_graph_pb2.TensorInfo]:
            call.signature_name = signature_name or DEFAULT_SIGNATURE
            servable = self._core.servable(request.model_spec)
            key = signature_name or DEFAULT_SIGNATURE
            if key not in servable.signature_defs:
                raise invalid_argument(
                    f'Serving signature name: "{key}" not found in signature def'
                )
            return servable.signature_defs[key].inputs

        format_ = fill_predict_request_from_json(body, get_inputs, request, self._max_depth)
        return predict_response_to_json(self._core.predict(request), format_)

    def _classify(self, spec: model_pb2.ModelSpec, body: bytes, call: _Call) -> Any:
        request = classification_pb2.ClassificationRequest(model_spec=spec)
        self._fill_examples(body, request, call)
        return classification_result_to_json(self._core.classify(request).result)

    def _regress(self, spec: model_pb2.ModelSpec, body: bytes, call: _Call) -> Any:
        request = regression_pb2.RegressionRequest(model_spec=spec)
        self._fill_examples(body, request, call)
        return regression_result_to_json(self._core.regress(request).result)

    def _fill_examples(self, body: bytes, request: Any, call: _Call) -> None:
        try:
            fill_examples_request_from_json(body, request, self._max_depth)
        finally:
            call.signature_name = request.model_spec.signature_name or DEFAULT_SIGNATURE

    def _metadata(self, spec: model_pb2.ModelSpec) -> Any:
        request = get_model_metadata_pb2.GetModelMetadataRequest(
            model_spec=spec, metadata_field=[SIGNATURE_DEF_FIELD]
        )
        return model_metadata_to_json(self._core.get_model_metadata(request))


def make_rest_server(
    core: ServingCore,
    host: str,
    port: int,
    *,
    metrics: Metrics | None = None,
    prometheus_path: str | None = None,
    timeout_seconds: float | None = DEFAULT_REST_TIMEOUT_S,
    num_threads: int = 16,
    track: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    pages: Callable[[HttpRequest], HttpResponse | None] | None = None,
) -> HttpServer:
    """A REST server for `core` on host:port (0: a free port); call `start()`, then `stop()`.

    Bodies are capped at `core.limits.max_request_bytes` (HTTP 413 beyond it), requests are
    answered by `num_threads` threads, and each request runs inside `track()` when given (the
    model server counts the requests in flight with it, to drain them on shutdown). `pages`
    answers the requests it knows first (the attention viewer's, `keras_attn.serving.ui`) and
    None for the others, which go to the REST API.
    """
    api = RestApi(core, metrics, timeout_seconds, prometheus_path)

    def handler(request: HttpRequest) -> HttpResponse:
        with track() if track is not None else contextlib.nullcontext():
            page = pages(request) if pages is not None else None
            return page if page is not None else api.respond(request)

    return HttpServer(
        handler, host, port, num_threads=num_threads, max_body_bytes=api.limits.max_request_bytes
    )
