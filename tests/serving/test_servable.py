"""Signature runs in the servable's session: outputs, the deadline as the run's timeout, and
`close()` cancelling runs in flight."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.serving.deadline import request_deadline
from keras_attn.serving.servable import load_servable
from keras_attn.serving.status import ServingStatus

from .conftest import MODEL_NAME

# A spinner run of this many steps takes hours: only a cancellation ends it.
FOREVER = np.array([b"1000000000"], dtype=object)
# Cancellation stops a loop at its next step; this bound is seconds above what that takes.
CANCEL_BOUND_S = 3.0


def test_signatures_run_in_the_session_like_the_saved_model(model_base_path, reference):
    functions = load_servable(MODEL_NAME, model_base_path).functions
    texts = np.array([b"the small cat", b""], dtype=object)
    for key in ("serving_default", "translate_with_alignment"):
        got = functions.get(key)(text=texts)
        expected = reference.signatures[key](text=tf.constant(texts))
        assert sorted(got) == sorted(expected)
        for alias, value in expected.items():
            np.testing.assert_array_equal(got[alias], value.numpy())
    assert functions.get("__saved_model_init_op") is None
    assert functions.get("nope") is None


def outcome_within(seconds, function, *args, **kwargs):
    """Runs `function` on a daemon thread; its exception (or None), failing if it is still
    running after `seconds` (so a missing cancellation fails the test instead of hanging it)."""
    errors: list[BaseException | None] = []

    def run():
        try:
            function(*args, **kwargs)
            errors.append(None)
        except BaseException as error:  # noqa: BLE001  (returned to the test)
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return errors[0]


def spin_with_deadline(spin, seconds):
    with request_deadline(seconds):
        spin(text=FOREVER)


def test_a_run_is_cancelled_when_its_deadline_passes(spinner_base_path):
    spin = load_servable("spinner", spinner_base_path).functions.get("serving_default")
    assert spin(text=np.array([b"10", b"3"], dtype=object))["steps"].tolist() == [10, 3]
    started = time.monotonic()
    error = outcome_within(0.3 + CANCEL_BOUND_S, spin_with_deadline, spin, 0.3)
    assert isinstance(error, tf.errors.DeadlineExceededError), repr(error)
    assert time.monotonic() - started > 0.25
    with request_deadline(0.0), pytest.raises(ServingStatus) as error:
        spin(text=FOREVER)  # no time left: refused before it runs
    assert error.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert spin(text=np.array([b"5"], dtype=object))["steps"].tolist() == [5]


def test_close_cancels_the_runs_in_flight_and_refuses_new_ones(spinner_base_path):
    functions = load_servable("spinner", spinner_base_path).functions
    spin = functions.get("serving_default")
    threading.Timer(0.5, functions.close).start()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        outcomes = list(
            pool.map(lambda _: outcome_within(0.5 + CANCEL_BOUND_S, spin, text=FOREVER), range(2))
        )
    for error in outcomes:
        cancelled = isinstance(error, tf.errors.CancelledError)
        closed = isinstance(error, ServingStatus) and error.code == grpc.StatusCode.UNAVAILABLE
        assert cancelled or closed, repr(error)
    with pytest.raises(ServingStatus) as refused:
        spin(text=np.array([b"1"], dtype=object))
    assert refused.value.code == grpc.StatusCode.UNAVAILABLE
    assert refused.value.message == "The model server is shutting down"
