"""The deadline of the request being answered, carried through a context variable.

The stock server turns the gRPC deadline into `RunOptions.timeout_in_ms` for the session run
(`model_servers/prediction_service_impl.cc`, `DeadlineToTimeoutMillis`). Here the gRPC servicer
and the REST handler set the deadline for the duration of a call (`request_deadline`), the batch
threads set the deadline of the batch they run (`deadline_at`), and the code that runs or waits
for the model reads what is left (`remaining_seconds`, `check_deadline`): a session run gets the
rest as its timeout, so a request whose client has given up stops using the CPU.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

import grpc

from keras_attn.serving.status import ServingStatus

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "keras_attn_serving_deadline", default=None
)


@contextlib.contextmanager
def deadline_at(deadline: float | None) -> Iterator[None]:
    """Sets the current deadline to `deadline` (a `time.monotonic()` value; None: no deadline)."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def request_deadline(seconds_left: float | None) -> contextlib.AbstractContextManager[None]:
    """Sets the current request's deadline (`seconds_left` from now; None: no deadline)."""
    return deadline_at(None if seconds_left is None else time.monotonic() + seconds_left)


def current_deadline() -> float | None:
    """The current deadline as a `time.monotonic()` value, or None."""
    return _DEADLINE.get()


def remaining_seconds() -> float | None:
    """Seconds until the current request's deadline (never negative), or None."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return None
    return max(deadline - time.monotonic(), 0.0)


def deadline_exceeded() -> ServingStatus:
    """The DEADLINE_EXCEEDED status a request whose deadline has passed gets."""
    return ServingStatus(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")


def check_deadline() -> None:
    """Raises DEADLINE_EXCEEDED when the current request's deadline has passed."""
    left = remaining_seconds()
    if left is not None and left <= 0:
        raise deadline_exceeded()
