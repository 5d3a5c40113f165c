"""Server-side batching with the semantics of stock TensorFlow Serving's batching session.

One `BatchScheduler` per server (stock shares one `SharedBatchScheduler` across models): a pool
of `num_batch_threads` threads serving one queue per (model version, signature). A task (one
request's input tensors, batch-major) joins the open batch of its queue; a batch is processed
once it holds `max_batch_size` rows, once `batch_timeout_micros` have passed since its first task,
or once a newer batch has been opened behind it. Processing concatenates the tasks' inputs along
dim 0 (padding the other dims to the largest in the batch when `pad_variable_length_inputs` is
set, with the first element of each tensor as stock does), pads the batch to the next
`allowed_batch_sizes` entry by repeating the first row, makes one model call and splits every
output back along dim 0.

Errors, as stock (tensorflow/serving `batching/batching_session.cc`,
`tensorflow/core/kernels/batching_util/shared_batch_scheduler.h`):
- a task larger than max_batch_size: INVALID_ARGUMENT
  `Task size N is larger than maximum input batch size M`;
- no room in the open batch and `max_enqueued_batches` batches queued: UNAVAILABLE
  `The batch scheduling queue to which this task was submitted is full`;
- scalar inputs, or inputs of one request with different dim-0 sizes: INVALID_ARGUMENT
  `Batching Run() input tensors must have at least one dimension` / `... must have equal
  0th-dimension size`;
- tasks whose inputs differ beyond dim 0 without padding: the whole batch fails with
  INVALID_ARGUMENT `Tensors with name '<name>' from different tasks have different shapes and
  padding is turned off. ...`.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import grpc
import numpy as np

from keras_attn.serving.config import BatchingOptions
from keras_attn.serving.deadline import (
    current_deadline,
    deadline_at,
    deadline_exceeded,
    remaining_seconds,
)
from keras_attn.serving.status import ServingStatus, invalid_argument
from keras_attn.serving.tensors import as_ndarray

BatchFunction = Callable[[dict[str, np.ndarray]], Mapping[str, Any]]


class _Task:
    """One request waiting for its rows of a batched call.

    `deadline` is the request's (a `time.monotonic()` value, or None); `abandoned` is set when
    the request stops waiting, so a batch thread that has not taken the task yet drops it.
    """

    def __init__(self, inputs: dict[str, np.ndarray], size: int, deadline: float | None):
        self.inputs = inputs
        self.size = size
        self.deadline = deadline
        self.abandoned = False
        self.done = threading.Event()
        self.outputs: dict[str, np.ndarray] | None = None
        self.error: BaseException | None = None

    def expired(self, now: float) -> bool:
        return self.abandoned or (self.deadline is not None and self.deadline <= now)

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


class _Batch:
    def __init__(self) -> None:
        self.tasks: list[_Task] = []
        self.size = 0
        self.start = 0.0


class _Queue:
    """The batches of one (servable, signature): the last one is open."""

    def __init__(self, run: BatchFunction, tensor_names: Mapping[str, str]):
        self.run = run
        self.tensor_names = dict(tensor_names)
        self.batches: collections.deque[_Batch] = collections.deque([_Batch()])
        self.closed = False


class BatchScheduler:
    """A shared pool of batch threads over per-signature queues.

    Args:
        options: the resolved batching parameters.
    """

    def __init__(self, options: BatchingOptions):
        self.options = options
        self._cond = threading.Condition()
        self._queues: list[_Queue] = []
        self._next = 0
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._work, name=f"batch-{i}", daemon=True)
            for i in range(options.num_batch_threads)
        ]
        for thread in self._threads:
            thread.start()

    def add_queue(self, run: BatchFunction, tensor_names: Mapping[str, str]) -> _Queue:
        """A queue whose batches `run` processes; `tensor_names` maps aliases to graph names."""
        queue = _Queue(run, tensor_names)
        with self._cond:
            self._queues.append(queue)
        return queue

    def remove_queue(self, queue: _Queue) -> None:
        """Stops accepting tasks on `queue`; batches already queued are still processed."""
        with self._cond:
            queue.closed = True
            self._cond.notify_all()

    def run(self, queue: _Queue, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Schedules one request's inputs and waits for its outputs.

        A task whose deadline passes while it waits is dropped from its batch if the batch has
        not started; a batch runs with the latest deadline of its tasks (none if one of them
        has none), so it is cancelled once every request in it has given up.

        Raises:
            ServingStatus: the stock batching errors above, DEADLINE_EXCEEDED when the
                request's deadline passes first, or the error of the batched call.
        """
        task = _Task(inputs, _task_size(inputs), current_deadline())
        with self._cond:
            if task.size > self.options.max_batch_size:
                raise invalid_argument(
                    f"Task size {task.size} is larger than maximum input batch size "
                    f"{self.options.max_batch_size}"
                )
            if queue.closed:
                raise ServingStatus(grpc.StatusCode.UNAVAILABLE, "Queue closed")
            open_batch = queue.batches[-1]
            if open_batch.size + task.size > self.options.max_batch_size:
                if len(queue.batches) >= self.options.max_enqueued_batches:
                    raise ServingStatus(
                        grpc.StatusCode.UNAVAILABLE,
                        "The batch scheduling queue to which this task was submitted is full",
                    )
                open_batch = _Batch()
                queue.batches.append(open_batch)
            if not open_batch.tasks:
                open_batch.start = time.monotonic()
            open_batch.tasks.append(task)
            open_batch.size += task.size
            self._cond.notify_all()
        if not task.done.wait(remaining_seconds()):
            task.abandoned = True
            raise deadline_exceeded()
        if task.error is not None:
            raise task.error
        return task.outputs

    def num_enqueued_tasks(self) -> int:
        """Tasks waiting in all queues (not yet taken by a batch thread)."""
        with self._cond:
            return sum(len(b.tasks) for q in self._queues for b in q.batches)

    def cancel_queued(self, error: BaseException) -> None:
        """Fails every task not yet taken by a batch thread with `error` (server shutdown)."""
        with self._cond:
            for queue in self._queues:
                for batch in queue.batches:
                    for task in batch.tasks:
                        task.fail(error)
                queue.batches = collections.deque([_Batch()])
            self._cond.notify_all()

    def stop(self) -> None:
        """Processes what is queued, then ends the batch threads."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()

    # ------------------------------------------------------------------ batch threads

    def _ready_batch(self) -> tuple[_Queue | None, _Batch | None, float | None]:
        """The next batch to process (round robin over queues), else how long to wait."""
        now = time.monotonic()
        timeout = self.options.batch_timeout_micros / 1e6
        wait: float | None = None
        count = len(self._queues)
        for offset in range(count):
            index = (self._next + offset) % count
            queue = self._queues[index]
            batch = queue.batches[0]
            if not batch.tasks:
                continue
            due = batch.start + timeout
            if (
                len(queue.batches) > 1
                or batch.size >= self.options.max_batch_size
                or now >= due
                or self._stopped
                or queue.closed
            ):
                queue.batches.popleft()
                if not queue.batches:
                    queue.batches.append(_Batch())
                self._next = (index + 1) % count
                return queue, batch, None
            wait = due - now if wait is None else min(wait, due - now)
        self._queues = [q for q in self._queues if not (q.closed and not q.batches[0].tasks)]
        return None, None, wait

    def _work(self) -> None:
        while True:
            with self._cond:
                while True:
                    queue, batch, wait = self._ready_batch()
                    if batch is not None:
                        break
                    if self._stopped:
                        return
                    self._cond.wait(wait)
            self._process(queue, batch)

    def _process(self, queue: _Queue, batch: _Batch) -> None:
        now = time.monotonic()
        tasks = []
        for task in batch.tasks:
            if task.expired(now):
                task.fail(deadline_exceeded())
            else:
                tasks.append(task)
        if not tasks:
            return
        deadlines = [task.deadline for task in tasks]
        deadline = None if None in deadlines else max(deadlines)
        try:
            merged, padded_size = self._merge(queue, tasks)
            with deadline_at(deadline):
                outputs = {name: as_ndarray(value) for name, value in queue.run(merged).items()}
            offset = 0
            splits = []
            for task in tasks:
                splits.append(offset)
                offset += task.size
            for name, value in outputs.items():
                if value.ndim == 0 or value.shape[0] != padded_size:
                    raise invalid_argument(
                        f"Batched output tensor for output {name} has 0th dimension "
                        f"{value.shape[0] if value.ndim else 0} but should be {padded_size}"
                    )
            for task, start in zip(tasks, splits, strict=True):
                task.outputs = {
                    name: value[start : start + task.size] for name, value in outputs.items()
                }
        except BaseException as error:  # noqa: BLE001  (every task of the batch gets the error)
            for task in tasks:
                task.error = error
        for task in tasks:
            task.done.set()

    def _merge(self, queue: _Queue, tasks: list[_Task]) -> tuple[dict[str, np.ndarray], int]:
        size = sum(task.size for task in tasks)
        allowed = self.options.allowed_batch_sizes
        # A batch of empty requests stays empty: there is no row to pad with.
        padded_size = next((s for s in allowed if s >= size), size) if size else 0
        merged = {}
        for alias in sorted(tasks[0].inputs):
            parts = [task.inputs[alias] for task in tasks]
            inner = {part.shape[1:] for part in parts}
            if len(inner) > 1:
                if not self.options.pad_variable_length_inputs:
                    raise invalid_argument(
                        f"Tensors with name '{queue.tensor_names.get(alias, alias)}' from "
                        "different tasks have different shapes and padding is turned off. Set "
                        "pad_variable_length_inputs to true, or ensure that all tensors with "
                        "the same name have equal dimensions starting with the first dim."
                    )
                parts = _pad_to_largest(parts)
            tensor = np.concatenate(parts, axis=0)
            if padded_size > size:
                filler = np.repeat(tensor[:1], padded_size - size, axis=0)
                tensor = np.concatenate([tensor, filler], axis=0)
            merged[alias] = tensor
        return merged, padded_size


def _task_size(inputs: Mapping[str, np.ndarray]) -> int:
    if not inputs:
        raise invalid_argument("Batching Run() must have at least one input tensor")
    sizes = set()
    for value in inputs.values():
        if value.ndim == 0:
            raise invalid_argument("Batching Run() input tensors must have at least one dimension")
        sizes.add(value.shape[0])
    if len(sizes) > 1:
        raise invalid_argument("Batching Run() input tensors must have equal 0th-dimension size")
    return sizes.pop()


def _pad_to_largest(parts: list[np.ndarray]) -> list[np.ndarray]:
    """Pads dims 1.. of each part to the largest in the batch with the part's first element,
    as stock `batching/batching_util.cc::PadTensor` does (with its errors)."""
    ranks = {part.ndim for part in parts}
    if len(ranks) > 1:
        raise invalid_argument("Ranks of all tensors with the same name must match to pad them")
    if ranks.pop() > 6:
        raise invalid_argument("Only tensors with rank from 1 to 6 can be padded.")
    target = np.max([part.shape[1:] for part in parts], axis=0)
    padded = []
    for part in parts:
        if tuple(part.shape[1:]) == tuple(target):
            padded.append(part)
            continue
        if part.size == 0:
            raise invalid_argument("Got empty tensor in batch of non-empty tensors.")
        value = part.reshape(-1)[0]
        out = np.full((part.shape[0], *target), value, dtype=part.dtype)
        out[tuple(slice(0, s) for s in part.shape)] = part
        padded.append(out)
    return padded


class BatchingFunctions:
    """Signature functions of one servable whose calls go through a `BatchScheduler`.

    `get(key)` returns a callable with the interface of the plain signature function (keyword
    tensors in, a dict of outputs out), so request handling does not change with batching.

    Args:
        functions: the servable's signature functions (an object with `get(key)`).
        signature_defs: the servable's SignatureDefs (for tensor names in error messages).
        scheduler: the shared scheduler.
    """

    def __init__(
        self, functions: Any, signature_defs: Mapping[str, Any], scheduler: BatchScheduler
    ):
        self._functions = functions
        self._scheduler = scheduler
        self._queues: dict[str, _Queue] = {}
        self._lock = threading.Lock()
        self._signature_defs = signature_defs

    def get(self, key: str) -> Callable[..., dict[str, np.ndarray]] | None:
        function = self._functions.get(key)
        if function is None:
            return None
        with self._lock:
            queue = self._queues.get(key)
            if queue is None:
                signature = self._signature_defs.get(key)
                names = {a: i.name for a, i in signature.inputs.items()} if signature else {}
                queue = self._scheduler.add_queue(lambda inputs: function(**inputs), names)
                self._queues[key] = queue

        def batched(**tensors: Any) -> dict[str, np.ndarray]:
            return self._scheduler.run(queue, {k: as_ndarray(v) for k, v in tensors.items()})

        return batched

    def close(self) -> None:
        """Closes this servable's queues (called when the version is unloaded)."""
        with self._lock:
            for queue in self._queues.values():
                self._scheduler.remove_queue(queue)
