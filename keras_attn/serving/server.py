"""A local model server that speaks TensorFlow Serving's gRPC (and optionally REST) API.

`ModelServer` serves one model (`model_name` + `model_base_path`) or the models of a
`ModelServerConfig` (`model_config_file`), managed by `keras_attn.serving.manager.ModelManager`
(version policies, labels, new versions picked up by polling, config reloads), with
`tensorflow.serving.PredictionService` and `tensorflow.serving.ModelService` answering with the
status codes and messages of stock TensorFlow Serving, plus the gRPC health service
(`grpc.health.v1.Health`, SERVING once the models are loaded, NOT_SERVING as soon as a stop
begins) and server reflection. Optional: server-side batching (`keras_attn.serving.batching`),
the stock REST API (`keras_attn.serving.rest`) with Prometheus metrics, warm-up replay. It
binds 127.0.0.1 unless told otherwise.

Example:

    with ModelServer("translator", "models/translator", port=8500) as server:
        server.wait_for_termination()
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from tensorflow_serving.apis import (
    model_management_pb2,
    model_service_pb2,
    model_service_pb2_grpc,
    prediction_service_pb2,
    prediction_service_pb2_grpc,
)
from tensorflow_serving.config import model_server_config_pb2

from keras_attn.serving.config import (
    BatchingOptions,
    read_batching_options,
    read_model_server_config,
    read_prometheus_path,
    single_model_config,
)
from keras_attn.serving.core import DEFAULT_SIGNATURE, ServingCore
from keras_attn.serving.deadline import check_deadline, request_deadline
from keras_attn.serving.health import HealthService
from keras_attn.serving.limits import RequestLimits
from keras_attn.serving.manager import ModelManager
from keras_attn.serving.metrics import Metrics
from keras_attn.serving.servable import LoadError, Servable, load_servable
from keras_attn.serving.status import INTERNAL_ERROR_MESSAGE, ServingStatus

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_GRACE_PERIOD_S = 10.0
MAX_MESSAGE_LENGTH = 2**31 - 1
# After the grace period, how long a stop waits for cancelled runs and connections to close.
_CANCEL_WAIT_S = 2.0
PREDICTION_SERVICE = prediction_service_pb2.DESCRIPTOR.services_by_name[
    "PredictionService"
].full_name
MODEL_SERVICE = model_service_pb2.DESCRIPTOR.services_by_name["ModelService"].full_name


class _InFlight:
    """Counts the requests being answered, so a shutdown can wait for them to finish."""

    def __init__(self) -> None:
        self._count = 0
        self._idle = threading.Condition()

    def begin(self) -> Callable[[], None]:
        """Counts one request in flight until the returned function is called."""
        with self._idle:
            self._count += 1

        def end() -> None:
            with self._idle:
                self._count -= 1
                if not self._count:
                    self._idle.notify_all()

        return end

    @contextlib.contextmanager
    def track(self) -> Iterator[None]:
        """Counts the block as one request in flight."""
        end = self.begin()
        try:
            yield
        finally:
            end()

    def wait_idle(self, timeout: float | None) -> bool:
        """Waits until no request is in flight (or `timeout` passes); True when idle."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._count, timeout)


class StartInterrupted(Exception):
    """`ModelServer.start()` gave up because `interrupt()` was called (e.g. on SIGTERM)."""


class _Calls:
    """Runs requests for the servicers: deadline, metrics, and any failure as the call's status.

    A request whose deadline has passed while it waited for a thread is answered
    DEADLINE_EXCEEDED without running. A call stays in flight until its method has returned
    and gRPC has sent its status (or the call was cancelled), so a drain that ends the calls
    left once nothing is in flight never cuts an answer that is still being sent.
    """

    def __init__(self, core: ServingCore, metrics: Metrics | None, in_flight: _InFlight):
        self.core = core
        self.metrics = metrics
        self.in_flight = in_flight

    def __call__(
        self, context: grpc.ServicerContext, method: Any, request: Any, api: str | None = None
    ) -> Any:
        start = time.perf_counter()
        code = grpc.StatusCode.OK
        sent = self.in_flight.begin()
        if not context.add_callback(sent):  # the call has already ended
            sent()
        try:
            with self.in_flight.track(), request_deadline(context.time_remaining()):
                check_deadline()
                return method(request)
        except ServingStatus as status:
            code = status.code
            context.abort(status.code, status.grpc_message)
        except Exception:  # Never let a bad request take the server down.
            code = grpc.StatusCode.INTERNAL
            logger.exception("Request failed")
            context.abort(grpc.StatusCode.INTERNAL, INTERNAL_ERROR_MESSAGE)
        finally:
            if api is not None and self.metrics is not None:
                name, signature = self.core.metric_labels(*_model_and_signature(request))
                latency = time.perf_counter() - start
                self.metrics.record(name, signature, api, "GRPC", code.name, latency)


def _model_and_signature(request: Any) -> tuple[str, str]:
    """The model name and signature a prediction request names (for metrics)."""
    if hasattr(request, "tasks"):
        spec = request.tasks[0].model_spec if request.tasks else None
    else:
        spec = request.model_spec if request.HasField("model_spec") else None
    if spec is None:
        return "", DEFAULT_SIGNATURE
    return spec.name, spec.signature_name or DEFAULT_SIGNATURE


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """`tensorflow.serving.PredictionService` over a `ServingCore`."""

    def __init__(self, calls: _Calls):
        self._call = calls
        self._core = calls.core

    def Predict(self, request, context):  # noqa: N802  (gRPC method names)
        return self._call(context, self._core.predict, request, "Predict")

    def GetModelMetadata(self, request, context):  # noqa: N802
        return self._call(context, self._core.get_model_metadata, request)

    def Classify(self, request, context):  # noqa: N802
        return self._call(context, self._core.classify, request, "Classify")

    def Regress(self, request, context):  # noqa: N802
        return self._call(context, self._core.regress, request, "Regress")

    def MultiInference(self, request, context):  # noqa: N802
        return self._call(context, self._core.multi_inference, request, "MultiInference")


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    """`tensorflow.serving.ModelService`: model status and config reloads.

    `HandleReloadConfigRequest` follows `model_servers/model_service_impl.cc`: the new
    `ModelServerConfig` replaces the current one (models added, removed, labels changed); a
    failure is the call's status, success an OK `ReloadConfigResponse.status`.
    """

    def __init__(self, calls: _Calls, manager: ModelManager):
        self._call = calls
        self._core = calls.core
        self._manager = manager

    def GetModelStatus(self, request, context):  # noqa: N802
        return self._call(context, self._core.get_model_status, request)

    def HandleReloadConfigRequest(self, request, context):  # noqa: N802
        def reload(request: model_management_pb2.ReloadConfigRequest) -> Any:
            self._manager.reload_config(request.config)
            response = model_management_pb2.ReloadConfigResponse()
            response.status.SetInParent()
            return response

        return self._call(context, reload, request)


def format_address(host: str, port: int) -> str:
    """`host:port`, with brackets around an IPv6 host."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_grpc_channel_arguments(text: str) -> list[tuple[str, int | str]]:
    """Parses `--grpc_channel_arguments` (`key=value,key=value`, ints where they parse), as
    stock `server.cc::parseGrpcChannelArgs` does.

    Raises:
        ValueError: an entry without `=`.
    """
    arguments: list[tuple[str, int | str]] = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = entry.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value in --grpc_channel_arguments, got {entry!r}")
        try:
            arguments.append((key, int(value)))
        except ValueError:
            arguments.append((key, value))
    return arguments


class ModelServer:
    """Serves the models of a `ModelServerConfig` over gRPC (and REST when `rest_api_port` is set).

    Either `model_name` and `model_base_path` (one model, latest version) or `model_config_file`
    / `model_config` (several models, version policies, labels) say what to serve, as the stock
    flags do.

    Args:
        model_name: the name clients put in `ModelSpec.name` (single-model mode).
        model_base_path: the directory holding integer-named version directories.
        port: the gRPC port; 0 picks a free one (see `port` after `start()`).
        host: the address to bind, 127.0.0.1 by default.
        rest_api_port: the REST port; None disables REST, 0 picks a free port.
        max_workers: threads answering gRPC calls (stock `--grpc_max_threads`).
        enable_signature_method_name_check: the stock flag of that name (off by default).
        servable: an already loaded servable to serve instead of loading from disk.
        model_config_file: a text `ModelServerConfig` (overrides name/base path, as stock).
        model_config: the same as a message.
        model_config_file_poll_wait_seconds: re-read the config file this often (0: never).
        file_system_poll_wait_seconds: poll for new versions this often (stock default 1 s;
            0: only at start and on reloads).
        enable_batching: merge concurrent requests (`batching` or `batching_parameters_file`
            give the parameters; stock defaults otherwise).
        batching_parameters_file: a text `BatchingParameters`.
        batching: resolved batching options (instead of the file).
        allow_version_labels_for_unavailable_models: the stock flag of that name.
        enable_model_warmup: replay `assets.extra/tf_serving_warmup_requests` at load.
        num_request_iterations_for_warmup: times each warm-up request runs.
        max_num_load_retries: retries of a failed load (stock default 5).
        load_retry_interval_micros: pause between retries (stock default one minute).
        grpc_channel_arguments: stock `--grpc_channel_arguments`, e.g.
            `grpc.max_receive_message_length=1048576` (larger requests: RESOURCE_EXHAUSTED).
        monitoring_config_file: a text `MonitoringConfig`; with `prometheus_config { enable:
            true }` the REST port serves metrics at its `path`
            (default `/monitoring/prometheus/metrics`).
        prometheus_path: the same without a file (None: no metrics endpoint).
        rest_api_timeout_in_ms: the deadline of each REST request (stock default 30 s).
        rest_api_num_threads: threads answering REST requests (stock flag; 16).
        limits: the caps on each request (`RequestLimits()` by default; see
            `keras_attn.serving.limits`).
        ui: serve the attention viewer page on the REST port (`keras_attn.serving.ui`).
    """

    def __init__(
        self,
        model_name: str | None = None,
        model_base_path: str | None = None,
        *,
        port: int = 8500,
        host: str = DEFAULT_HOST,
        rest_api_port: int | None = None,
        max_workers: int = 16,
        enable_signature_method_name_check: bool = False,
        servable: Servable | None = None,
        model_config_file: str | None = None,
        model_config: model_server_config_pb2.ModelServerConfig | None = None,
        model_config_file_poll_wait_seconds: float = 0.0,
        file_system_poll_wait_seconds: float = 1.0,
        enable_batching: bool = False,
        batching_parameters_file: str | None = None,
        batching: BatchingOptions | None = None,
        allow_version_labels_for_unavailable_models: bool = False,
        enable_model_warmup: bool = True,
        num_request_iterations_for_warmup: int = 1,
        max_num_load_retries: int = 5,
        load_retry_interval_micros: int = 60_000_000,
        grpc_channel_arguments: str = "",
        monitoring_config_file: str | None = None,
        prometheus_path: str | None = None,
        rest_api_timeout_in_ms: int = 30_000,
        rest_api_num_threads: int = 16,
        limits: RequestLimits | None = None,
        ui: bool = False,
    ):
        self.model_name = model_name
        self.model_base_path = model_base_path
        self.host = host
        self._requested_port = port
        self._requested_rest_port = rest_api_port
        self._max_workers = max_workers
        self._method_check = enable_signature_method_name_check
        self._servable = servable
        self._model_config_file = model_config_file
        self._model_config = model_config
        self._config_poll_wait = model_config_file_poll_wait_seconds
        self._poll_wait = file_system_poll_wait_seconds
        self._enable_batching = enable_batching
        self._batching_file = batching_parameters_file
        self._batching = batching
        self._allow_unavailable_labels = allow_version_labels_for_unavailable_models
        self._warmup = enable_model_warmup
        self._warmup_iterations = num_request_iterations_for_warmup
        self._retries = max_num_load_retries
        self._retry_interval = load_retry_interval_micros / 1e6
        self._channel_arguments = grpc_channel_arguments
        self._monitoring_file = monitoring_config_file
        self._prometheus_path = prometheus_path
        self._rest_timeout = rest_api_timeout_in_ms / 1000
        self._rest_threads = rest_api_num_threads
        self.limits = limits or RequestLimits()
        self._ui = ui
        self._in_flight = _InFlight()
        self._interrupted = threading.Event()
        self.manager: ModelManager | None = None
        self.metrics = Metrics()
        self._grpc: grpc.Server | None = None
        self._health: HealthService | None = None
        self._rest: Any = None
        self.port: int | None = None
        self.rest_api_port: int | None = None
        self._stopped = threading.Event()
        self._terminated = threading.Event()

    @property
    def version(self) -> int:
        """The highest available version of the first configured model (after `start()`)."""
        if self.manager is None:
            raise RuntimeError("The server has not loaded a model yet; call start().")
        name = self.manager.config.model_config_list.config[0].name
        return self.manager.available()[name][-1]

    def describe_models(self) -> str:
        """`name version N` for every model with an available version, e.g. for the ready line."""
        available = self.manager.available() if self.manager else {}
        return ", ".join(
            f"{model.name} version {available[model.name][-1]}"
            for model in self.manager.config.model_config_list.config
            if available.get(model.name)
        )

    def _resolve_config(self) -> model_server_config_pb2.ModelServerConfig:
        if self._model_config is not None:
            return self._model_config
        if self._model_config_file:
            return read_model_server_config(self._model_config_file)
        if not self.model_base_path:
            raise LoadError(
                "Both server_options.model_base_path and server_options.model_config_file "
                "are empty!",
                grpc.StatusCode.INVALID_ARGUMENT,
            )
        return single_model_config(self.model_name or "default", self.model_base_path)

    def _resolve_batching(self) -> BatchingOptions | None:
        if not self._enable_batching:
            if self._batching_file:
                raise LoadError(
                    "server_options.batching_parameters_file is set without setting "
                    "server_options.enable_batching to true.",
                    grpc.StatusCode.INVALID_ARGUMENT,
                )
            return None
        return self._batching or read_batching_options(self._batching_file)

    def _load_models(self) -> ModelManager:
        """Reads the configs and loads every model; LoadError carries any failure."""
        preloaded = self._servable

        def loader(name: str, base_path: str, version: int) -> Servable:
            if preloaded is not None and (name, version) == (preloaded.name, preloaded.version):
                return preloaded
            return load_servable(name, base_path, version)

        try:
            config = self._resolve_config()
            batching = self._resolve_batching()
            if self._monitoring_file:
                self._prometheus_path = read_prometheus_path(self._monitoring_file)
            manager = ModelManager(
                loader=loader,
                file_system_poll_wait_seconds=self._poll_wait,
                model_config_file=self._model_config_file,
                model_config_file_poll_wait_seconds=self._config_poll_wait,
                allow_version_labels_for_unavailable_models=self._allow_unavailable_labels,
                batching=batching,
                enable_model_warmup=self._warmup,
                num_request_iterations_for_warmup=self._warmup_iterations,
                max_num_load_retries=self._retries,
                load_retry_interval_seconds=self._retry_interval,
            )
        except ServingStatus as status:
            raise LoadError(status.message, status.code) from None
        self.manager = manager
        if self._interrupted.is_set():
            manager.interrupt()
        try:
            manager.reload_config(config, wait_for_versions=True)
        except ServingStatus as status:
            manager.stop()
            if self._interrupted.is_set():  # the load gave up because it was interrupted
                raise StartInterrupted("stopped while loading the models") from None
            raise LoadError(status.message, status.code) from None
        if self._interrupted.is_set():
            manager.stop()
            raise StartInterrupted("stopped while loading the models")
        return manager

    def interrupt(self) -> None:
        """Makes a `start()` in progress give up as soon as the version being loaded is done
        (it raises `StartInterrupted`). Safe to call from a signal handler."""
        self._interrupted.set()
        if self.manager is not None:
            self.manager.interrupt()

    def start(self) -> ModelServer:
        """Loads the models, binds the ports and starts answering. Returns self.

        Raises:
            keras_attn.serving.servable.LoadError: a bad config, or a model that did not load.
            OSError: a port could not be bound.
            ValueError: malformed `grpc_channel_arguments`.
            StartInterrupted: `interrupt()` was called while the models loaded.
        """
        channel_arguments = parse_grpc_channel_arguments(self._channel_arguments)
        self._load_models()
        core = ServingCore(
            self.manager,
            enable_signature_method_name_check=self._method_check,
            limits=self.limits,
        )
        calls = _Calls(core, self.metrics, self._in_flight)
        options = dict(
            [
                ("grpc.max_send_message_length", MAX_MESSAGE_LENGTH),
                ("grpc.so_reuseport", 0),
                *channel_arguments,
            ]
        )
        # --max_request_bytes caps the message, unless the channel arguments set a smaller cap.
        given = options.get("grpc.max_receive_message_length")
        receive = self.limits.max_request_bytes
        if isinstance(given, int) and given >= 0:
            receive = min(receive, given)
        options["grpc.max_receive_message_length"] = receive
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="grpc"),
            options=list(options.items()),
        )
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            PredictionServicer(calls), server
        )
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(
            ModelServicer(calls, self.manager), server
        )
        self._health = HealthService()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection(
            (
                PREDICTION_SERVICE,
                MODEL_SERVICE,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            server,
        )
        address = format_address(self.host, self._requested_port)
        unavailable = f"cannot bind gRPC address {address} (in use, or not an address of this host)"
        try:
            port = server.add_insecure_port(address)
        except RuntimeError:
            port = 0
        if port == 0:
            self.manager.stop()
            raise OSError(unavailable)
        self.port = port
        if self._requested_rest_port is not None:
            from keras_attn.serving.rest import make_rest_server

            rest_address = format_address(self.host, self._requested_rest_port)
            pages = None
            if self._ui:
                from keras_attn.serving.ui import ViewerPages

                available = self.manager.available
                pages = ViewerPages(
                    lambda: sorted(name for name, versions in available().items() if versions),
                    self._decoding,
                ).respond
            try:
                self._rest = make_rest_server(
                    core,
                    self.host,
                    self._requested_rest_port,
                    metrics=self.metrics,
                    prometheus_path=self._prometheus_path,
                    timeout_seconds=self._rest_timeout,
                    num_threads=self._rest_threads,
                    track=self._in_flight.track,
                    pages=pages,
                ).start()
            except OSError as error:
                server.stop(None)  # release the gRPC port bound above
                self.manager.stop()
                raise OSError(
                    f"cannot bind REST address {rest_address}: {error.strerror or error}"
                ) from None
            self.rest_api_port = self._rest.port
        server.start()
        self._grpc = server
        self.manager.start()
        for service in ("", PREDICTION_SERVICE, MODEL_SERVICE):
            self._health.set(service, health_pb2.HealthCheckResponse.SERVING)
        logger.info("Serving %s on %s", self.describe_models(), self.describe())
        return self

    def describe(self) -> str:
        """Where the server listens, e.g. `127.0.0.1:8500 (gRPC), REST on 127.0.0.1:8501`."""
        text = f"{format_address(self.host, self.port)} (gRPC)"
        if self.rest_api_port is not None:
            text += f", REST on {format_address(self.host, self.rest_api_port)}"
        return text

    def _decoding(self, name: str) -> dict | None:
        """How the latest available version of model `name` decodes, as its export recorded it
        (None when it did not, or no version is available)."""
        from tensorflow_serving.apis import model_pb2

        from keras_attn.formats import read_export_description

        try:
            servable = self.manager.servable(model_pb2.ModelSpec(name=name))
        except ServingStatus:  # unloaded meanwhile: the page shows no decoder
            return None
        return read_export_description(servable.path)

    def stop(self, grace: float | None = DEFAULT_GRACE_PERIOD_S) -> None:
        """Stops gracefully within `grace` seconds, whatever the clients do.

        Health turns NOT_SERVING and new calls and connections are refused at once; REST
        connections that are idle or still sending their request are closed at once; requests
        in flight (gRPC and REST) may finish for `grace` seconds. Then the model runs still in
        flight are cancelled, queued batch tasks fail with UNAVAILABLE, and every remaining
        connection is closed; the whole stop takes `grace` plus at most a few seconds.

        Args:
            grace: seconds in-flight requests may take (None: no limit).
        """
        if self._stopped.is_set() or self._grpc is None:
            return
        deadline = None if grace is None else time.monotonic() + max(grace, 0.0)

        def remaining() -> float | None:
            return None if deadline is None else max(deadline - time.monotonic(), 0.0)

        self._stopped.set()
        self._health.enter_graceful_shutdown()
        grpc_stopped = self._grpc.stop(remaining())
        rest_stop = None
        if self._rest is not None:
            rest_stop = threading.Thread(
                target=self._rest.stop, args=(remaining(),), name="rest-stop", daemon=True
            )
            rest_stop.start()
        self._in_flight.wait_idle(remaining())
        self.manager.cancel_runs()
        self._in_flight.wait_idle(_CANCEL_WAIT_S)
        # Every request is answered: end the calls left (streams such as reflection's) and the
        # connections now, not when the grace period is over (stop(None) blocks until done).
        threading.Thread(target=self._grpc.stop, args=(None,), daemon=True).start()
        grpc_stopped.wait(_CANCEL_WAIT_S)
        if rest_stop is not None:
            rest_stop.join(_CANCEL_WAIT_S)
        self.manager.stop()
        self._terminated.set()

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        """Blocks until `stop()` has finished (or `timeout` passes); True when stopped."""
        return self._terminated.wait(timeout)

    def __enter__(self) -> ModelServer:
        if self._grpc is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
