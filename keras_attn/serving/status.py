"""Request errors with the gRPC status code and message TensorFlow Serving would return.

Every request handler in `keras_attn.serving` reports a failure by raising `ServingStatus`; the gRPC
servicers turn it into a status on the call and the REST handler into `{"error": ...}` with the
HTTP code stock TensorFlow Serving uses for that status (`http_server.cc::ToHTTPStatusCode`).
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

# `model_servers/grpc_status_util.cc::ToGRPCStatus` cuts messages at this many characters.
ERROR_MESSAGE_LIMIT = 1024
# What a client is told of a failure that is the server's fault (the log has the traceback).
INTERNAL_ERROR_MESSAGE = "Internal error (the server's log has the details)"
# What requests get once a shutdown has cancelled the model runs (UNAVAILABLE).
SHUTTING_DOWN_MESSAGE = "The model server is shutting down"

_HTTP_STATUS = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}

_CODE_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


class ServingStatus(Exception):
    """A failed request: a gRPC status code and the message sent back to the client.

    Args:
        code: the `grpc.StatusCode` of the failure (never `OK`).
        message: the human-readable message, worded as stock TensorFlow Serving words it.
    """

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message

    @property
    def grpc_message(self) -> str:
        """The message as the stock server puts it on the wire (cut after 1024 characters; the
        REST API cuts its error messages the same way)."""
        if len(self.message) > ERROR_MESSAGE_LIMIT:
            return self.message[:ERROR_MESSAGE_LIMIT] + "...TRUNCATED"
        return self.message

    @property
    def http_status(self) -> int:
        """The HTTP status code the stock REST API answers this status with."""
        return _HTTP_STATUS.get(self.code, 500)


def code_from_number(number: int) -> grpc.StatusCode:
    """The `grpc.StatusCode` of a numeric code (TensorFlow error codes use the same numbers)."""
    return _CODE_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)


def _status_of(code: grpc.StatusCode) -> Callable[[str], ServingStatus]:
    """A function `message -> ServingStatus(code, message)`, named after the code."""

    def make(message: str) -> ServingStatus:
        return ServingStatus(code, message)

    make.__name__ = make.__qualname__ = code.name.lower()
    make.__doc__ = f"A ServingStatus with code {code.name}."
    return make


invalid_argument = _status_of(grpc.StatusCode.INVALID_ARGUMENT)
not_found = _status_of(grpc.StatusCode.NOT_FOUND)
failed_precondition = _status_of(grpc.StatusCode.FAILED_PRECONDITION)
internal = _status_of(grpc.StatusCode.INTERNAL)
unimplemented = _status_of(grpc.StatusCode.UNIMPLEMENTED)
resource_exhausted = _status_of(grpc.StatusCode.RESOURCE_EXHAUSTED)
unavailable = _status_of(grpc.StatusCode.UNAVAILABLE)
