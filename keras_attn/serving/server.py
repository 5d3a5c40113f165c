"""A local model server that speaks TensorFlow Serving's gRPC (and optionally REST) API.

`ModelServer` loads the latest integer version of a SavedModel under a model base path and serves
`tensorflow.serving.PredictionService` and `tensorflow.serving.ModelService` with the status codes
and messages of stock TensorFlow Serving, plus the gRPC health service (`grpc.health.v1.Health`,
SERVING once the model is loaded) and server reflection. With a REST port it also answers the
stock REST API (`keras_attn.serving.rest`). It binds 127.0.0.1 unless told otherwise.

Example:

    with ModelServer("translator", "models/translator", port=8500) as server:
        server.wait_for_termination()
"""

from __future__ import annotations

import logging
import threading
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from tensorflow_serving.apis import (
    model_service_pb2,
    model_service_pb2_grpc,
    prediction_service_pb2,
    prediction_service_pb2_grpc,
)

from keras_attn.serving.core import ServingCore
from keras_attn.serving.servable import Servable, load_servable
from keras_attn.serving.status import ServingStatus

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_GRACE_PERIOD_S = 10.0
MAX_MESSAGE_LENGTH = 2**31 - 1
PREDICTION_SERVICE = prediction_service_pb2.DESCRIPTOR.services_by_name[
    "PredictionService"
].full_name
MODEL_SERVICE = model_service_pb2.DESCRIPTOR.services_by_name["ModelService"].full_name


def _call(context: grpc.ServicerContext, method: Any, request: Any) -> Any:
    """Runs one request; a `ServingStatus` or any other failure becomes the call's status."""
    try:
        return method(request)
    except ServingStatus as status:
        context.abort(status.code, status.grpc_message)
    except Exception as error:  # Never let a bad request take the server down.
        logger.exception("Request failed")
        context.abort(grpc.StatusCode.INTERNAL, f"{type(error).__name__}: {error}")


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """`tensorflow.serving.PredictionService` over a `ServingCore`."""

    def __init__(self, core: ServingCore):
        self._core = core

    def Predict(self, request, context):  # noqa: N802  (gRPC method names)
        return _call(context, self._core.predict, request)

    def GetModelMetadata(self, request, context):  # noqa: N802
        return _call(context, self._core.get_model_metadata, request)

    def Classify(self, request, context):  # noqa: N802
        return _call(context, self._core.classify, request)

    def Regress(self, request, context):  # noqa: N802
        return _call(context, self._core.regress, request)

    def MultiInference(self, request, context):  # noqa: N802
        return _call(context, self._core.multi_inference, request)


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    """`tensorflow.serving.ModelService` over a `ServingCore` (no config reloads yet)."""

    def __init__(self, core: ServingCore):
        self._core = core

    def GetModelStatus(self, request, context):  # noqa: N802
        return _call(context, self._core.get_model_status, request)

    def HandleReloadConfigRequest(self, request, context):  # noqa: N802
        context.abort(
            grpc.StatusCode.UNIMPLEMENTED,
            "HandleReloadConfigRequest is not supported by this server: it serves the model "
            "given by --model_name and --model_base_path; restart it to serve another.",
        )


def format_address(host: str, port: int) -> str:
    """`host:port`, with brackets around an IPv6 host."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ModelServer:
    """Serves one model over gRPC (and REST when `rest_api_port` is given).

    Args:
        model_name: the name clients put in `ModelSpec.name`.
        model_base_path: the directory holding integer-named version directories.
        port: the gRPC port; 0 picks a free one (see `port` after `start()`).
        host: the address to bind, 127.0.0.1 by default.
        rest_api_port: the REST port; None disables REST, 0 picks a free port.
        max_workers: threads answering gRPC calls.
        enable_signature_method_name_check: the stock flag of that name (off by default).
        servable: an already loaded servable to serve instead of loading from disk.
    """

    def __init__(
        self,
        model_name: str,
        model_base_path: str,
        *,
        port: int = 8500,
        host: str = DEFAULT_HOST,
        rest_api_port: int | None = None,
        max_workers: int = 16,
        enable_signature_method_name_check: bool = False,
        servable: Servable | None = None,
    ):
        self.model_name = model_name
        self.model_base_path = model_base_path
        self.host = host
        self._requested_port = port
        self._requested_rest_port = rest_api_port
        self._max_workers = max_workers
        self._method_check = enable_signature_method_name_check
        self._servable = servable
        self._grpc: grpc.Server | None = None
        self._health: health.HealthServicer | None = None
        self._rest: Any = None
        self._rest_thread: threading.Thread | None = None
        self.port: int | None = None
        self.rest_api_port: int | None = None
        self._stopped = threading.Event()
        self._terminated = threading.Event()

    @property
    def version(self) -> int:
        """The served version (after `start()`)."""
        if self._servable is None:
            raise RuntimeError("The server has not loaded a model yet; call start().")
        return self._servable.version

    def start(self) -> ModelServer:
        """Loads the model, binds the ports and starts answering. Returns self.

        Raises:
            keras_attn.serving.servable.LoadError: no loadable version under the base path.
            OSError: a port could not be bound.
        """
        if self._servable is None:
            self._servable = load_servable(self.model_name, self.model_base_path)
        core = ServingCore([self._servable], enable_signature_method_name_check=self._method_check)
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_LENGTH),
            ("grpc.max_receive_message_length", MAX_MESSAGE_LENGTH),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="grpc"),
            options=options,
        )
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            PredictionServicer(core), server
        )
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelServicer(core), server)
        self._health = health.HealthServicer(
            experimental_non_blocking=True,
            experimental_thread_pool=futures.ThreadPoolExecutor(max_workers=1),
        )
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
            raise OSError(unavailable) from None
        if port == 0:
            raise OSError(unavailable)
        self.port = port
        if self._requested_rest_port is not None:
            from keras_attn.serving.rest import make_rest_server

            rest_address = format_address(self.host, self._requested_rest_port)
            try:
                self._rest = make_rest_server(core, self.host, self._requested_rest_port)
            except OSError as error:
                server.stop(None)  # release the gRPC port bound above
                raise OSError(
                    f"cannot bind REST address {rest_address}: {error.strerror or error}"
                ) from None
            self.rest_api_port = self._rest.server_address[1]
        server.start()
        self._grpc = server
        if self._rest is not None:
            self._rest_thread = threading.Thread(
                target=self._rest.serve_forever, name="rest", daemon=True
            )
            self._rest_thread.start()
        for service in ("", PREDICTION_SERVICE, MODEL_SERVICE):
            self._health.set(service, health_pb2.HealthCheckResponse.SERVING)
        logger.info("Serving %s version %d on %s", self.model_name, self.version, self.describe())
        return self

    def describe(self) -> str:
        """Where the server listens, e.g. `127.0.0.1:8500 (gRPC), REST on 127.0.0.1:8501`."""
        text = f"{format_address(self.host, self.port)} (gRPC)"
        if self.rest_api_port is not None:
            text += f", REST on {format_address(self.host, self.rest_api_port)}"
        return text

    def stop(self, grace: float | None = DEFAULT_GRACE_PERIOD_S) -> None:
        """Stops gracefully: health NOT_SERVING, refuse new calls, finish in-flight ones.

        Args:
            grace: seconds in-flight gRPC calls may take before they are cancelled
                (None: no limit). In-flight REST requests are always finished.
        """
        if self._stopped.is_set() or self._grpc is None:
            return
        self._stopped.set()
        self._health.enter_graceful_shutdown()
        stopped = self._grpc.stop(grace)
        if self._rest is not None:
            self._rest.shutdown()
            self._rest.server_close()
        stopped.wait()
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
