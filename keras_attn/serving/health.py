"""The gRPC health service (`grpc.health.v1.Health`) of the model server.

The same protocol as grpcio's `grpc_health.v1.health.HealthServicer`: `Check` answers a service's
status (NOT_FOUND for a name never set), `Watch` streams its status and every change
(SERVICE_UNKNOWN for a name never set). Three things differ, all about hostile or unlucky
clients:

- No message is sent while the service's lock is held. grpcio's servicer sends under its lock
  and waits there for the send to complete, while the server's completion thread may be waiting
  for the same lock to run a closed stream's callback: a burst of Watch streams that open and
  close can deadlock the whole gRPC server.
- A service name is forgotten when its last Watch stream closes, so a flood of made-up names
  leaves nothing behind.
- `enter_graceful_shutdown` sends NOT_SERVING to every watcher and then ends each Watch call with
  OK, so a client's health checker learns the server is going away and its stream does not hold
  the drain open.

Watch runs on gRPC's non-blocking streaming API: an open stream holds no thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN

Send = Callable[[Any], None]


class _Stream:
    """One Watch call's send callback: a None message ends the call, once; later sends are
    dropped."""

    def __init__(self, send: Send):
        self._send = send
        self._lock = threading.Lock()
        self._ended = False

    def __call__(self, response: Any) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = response is None
            self._send(response)


class HealthService(health_pb2_grpc.HealthServicer):
    """`grpc.health.v1.Health`; the overall service ("") starts SERVING."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._statuses: dict[str, int] = {"": SERVING}
        self._watchers: dict[str, set[_Stream]] = {}
        self._stopping = False

    def set(self, service: str, status: int) -> None:
        """Sets a service's status and tells its watchers (ignored once shutting down)."""
        with self._lock:
            if self._stopping:
                return
            self._statuses[service] = status
            watchers = list(self._watchers.get(service, ()))
        for stream in watchers:
            stream(health_pb2.HealthCheckResponse(status=status))

    def enter_graceful_shutdown(self) -> None:
        """Every service NOT_SERVING for good; every open Watch call gets it, then ends (OK)."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            for service in self._statuses:
                self._statuses[service] = NOT_SERVING
            watchers = [stream for streams in self._watchers.values() for stream in streams]
        for stream in watchers:
            stream(health_pb2.HealthCheckResponse(status=NOT_SERVING))
            stream(None)

    def watched_services(self) -> int:
        """How many service names have an open Watch call."""
        with self._lock:
            return len(self._watchers)

    def Check(self, request, context):  # noqa: N802  (gRPC method names)
        with self._lock:
            status = self._statuses.get(request.service)
        if status is None:
            context.set_code(grpc.StatusCode.NOT_FOUND)
            return health_pb2.HealthCheckResponse()
        return health_pb2.HealthCheckResponse(status=status)

    def Watch(self, request, context, send_response_callback=None):  # noqa: N802
        service = request.service
        stream = _Stream(send_response_callback)
        with self._lock:
            status = self._statuses.get(service, SERVICE_UNKNOWN)
        stream(health_pb2.HealthCheckResponse(status=status))
        with self._lock:
            stopping = self._stopping
            if not stopping:
                self._watchers.setdefault(service, set()).add(stream)
            current = self._statuses.get(service, SERVICE_UNKNOWN)
        if current != status:  # changed between the first answer and the registration
            stream(health_pb2.HealthCheckResponse(status=current))
        if stopping:
            stream(None)
        elif not context.add_callback(lambda: self._forget(service, stream)):
            self._forget(service, stream)  # the call ended before the callback could be added

    def _forget(self, service: str, stream: _Stream) -> None:
        with self._lock:
            streams = self._watchers.get(service)
            if streams is not None:
                streams.discard(stream)
                if not streams:
                    del self._watchers[service]
        stream(None)


# Watch answers on gRPC's non-blocking streaming API, from one thread of its own.
HealthService.Watch.experimental_non_blocking = True
HealthService.Watch.experimental_thread_pool = futures.ThreadPoolExecutor(
    max_workers=1, thread_name_prefix="health"
)
