"""Model management as stock TensorFlow Serving does it: config, version policies, labels, polling.

`ModelManager` holds a `ModelServerConfig` and, for every configured model, the versions it has
seen and their states (START, LOADING, AVAILABLE, UNLOADING, END; kept after END, as the stock
`ServableStateMonitor` keeps them). Each poll of the file system (every
`file_system_poll_wait_seconds` on a background thread, as `FileSystemStoragePathSource` does)
computes the aspired versions from the model's version policy, then applies stock's
`AvailabilityPreservingPolicy` one action at a time:

1. unload an un-aspired AVAILABLE version when an aspired one is available, or when more than one
   un-aspired version is available (the lowest goes), or when no version is aspired at all;
2. otherwise load the highest aspired version not tried yet.

So a new version is loaded before the old one is unloaded, and a version that fails to load ends
in END with its error (GetModelStatus shows it) while the previous version keeps serving. A failed
version is not tried again while it stays on disk (stock `enable_reload_servables_with_error`
off). Loads are retried `max_num_load_retries` times, `load_retry_interval_seconds` apart, and
include warm-up and (with batching on) a batching wrapper.

Sources (tensorflow/serving): `model_servers/server_core.cc` (ReloadConfig,
UpdateModelVersionLabelMap, WaitUntilModelsAvailable), `core/availability_preserving_policy.cc`,
`core/aspired_versions_manager.cc`, `sources/storage_path/file_system_storage_path_source.cc`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import grpc
from tensorflow_serving.apis import get_model_status_pb2, model_pb2
from tensorflow_serving.config import model_server_config_pb2

from keras_attn.serving.batching import BatchingFunctions, BatchScheduler
from keras_attn.serving.config import (
    BatchingOptions,
    aspired_versions,
    read_model_server_config,
    validate_model_config_list,
)
from keras_attn.serving.core import VersionStatus, find_servable
from keras_attn.serving.servable import LoadError, Servable, list_versions, load_servable
from keras_attn.serving.status import (
    SHUTTING_DOWN_MESSAGE,
    ServingStatus,
    failed_precondition,
    invalid_argument,
    unavailable,
)
from keras_attn.serving.warmup import run_warmup
from keras_attn.serving.xla import xla_compilations

logger = logging.getLogger(__name__)


def _xla_compilations() -> int | None:
    """`xla.xla_compilations()`, or None where this TensorFlow build does not let it be read."""
    try:
        return xla_compilations()
    except RuntimeError:
        return None


State = get_model_status_pb2.ModelVersionStatus
Loader = Callable[[str, str, int], Servable]


@dataclasses.dataclass
class _Version:
    state: int = State.START
    error_code: grpc.StatusCode = grpc.StatusCode.OK
    error_message: str = ""
    servable: Servable | None = None
    failed: bool = False


class ModelManager:
    """Loads, serves and unloads the versions of the models of a `ModelServerConfig`.

    Args:
        loader: loads one version, `loader(name, base_path, version) -> Servable`.
        file_system_poll_wait_seconds: seconds between polls for new versions (stock flag; 0
            polls once, at start and on each config reload).
        model_config_file: the config file to re-read every `model_config_file_poll_wait_seconds`.
        model_config_file_poll_wait_seconds: 0 (the stock default) never re-reads it.
        allow_version_labels_for_unavailable_models: the stock flag: labels may name versions
            that are not (yet) available, unless moving an existing label.
        batching: batching options, or None for no batching (`--enable_batching`).
        enable_model_warmup: replay `assets.extra/tf_serving_warmup_requests` on load.
        num_request_iterations_for_warmup: how many times each warm-up request runs.
        max_num_load_retries: extra attempts after a failed load (stock default 5).
        load_retry_interval_seconds: pause between attempts (stock default 60 s).
    """

    def __init__(
        self,
        *,
        loader: Loader = load_servable,
        file_system_poll_wait_seconds: float = 1.0,
        model_config_file: str | None = None,
        model_config_file_poll_wait_seconds: float = 0.0,
        allow_version_labels_for_unavailable_models: bool = False,
        batching: BatchingOptions | None = None,
        enable_model_warmup: bool = True,
        num_request_iterations_for_warmup: int = 1,
        max_num_load_retries: int = 5,
        load_retry_interval_seconds: float = 60.0,
    ):
        self._loader = loader
        self._poll_wait = file_system_poll_wait_seconds
        self._config_file = model_config_file
        self._config_poll_wait = model_config_file_poll_wait_seconds
        self._allow_unavailable_labels = allow_version_labels_for_unavailable_models
        self._warmup = enable_model_warmup
        self._warmup_iterations = num_request_iterations_for_warmup
        self._retries = max_num_load_retries
        self._retry_interval = load_retry_interval_seconds
        self._scheduler = BatchScheduler(batching) if batching is not None else None
        self._config = model_server_config_pb2.ModelServerConfig()
        self._lock = threading.Lock()  # guards the maps below (short reads and writes)
        self._changes = threading.RLock()  # one poll or reload at a time
        self._versions: dict[str, dict[int, _Version]] = {}
        self._labels: dict[str, dict[str, int]] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        # The signature functions of every version loaded and not yet collected, unloaded ones
        # included (requests may still run on them): `cancel_runs` closes them at shutdown.
        self._loaded_functions: weakref.WeakSet = weakref.WeakSet()

    # ------------------------------------------------------------------ lookups (any thread)

    def servable(self, model_spec: model_pb2.ModelSpec) -> Servable:
        """The AVAILABLE servable a ModelSpec asks for (stock lookup errors otherwise)."""
        name = model_spec.name
        with self._lock:
            versions = {
                v: entry.servable
                for v, entry in self._versions.get(name, {}).items()
                if entry.state == State.AVAILABLE and entry.servable is not None
            }
            labels = dict(self._labels.get(name, {}))
        return find_servable(versions, labels, model_spec)

    def version_states(self, name: str) -> list[VersionStatus]:
        """Every version of `name` seen so far, highest first."""
        with self._lock:
            entries = sorted(self._versions.get(name, {}).items(), reverse=True)
            return [VersionStatus(v, e.state, e.error_code, e.error_message) for v, e in entries]

    def signature_keys(self, name: str) -> set[str] | None:
        """The signature keys of `name`'s available versions; None for a model never configured."""
        with self._lock:
            versions = self._versions.get(name)
            if versions is None:
                return None
            return {
                key
                for entry in versions.values()
                if entry.servable is not None
                for key in entry.servable.signature_defs
            }

    def available(self) -> dict[str, list[int]]:
        """Model name -> AVAILABLE versions, ascending."""
        with self._lock:
            return {
                name: sorted(v for v, e in versions.items() if e.state == State.AVAILABLE)
                for name, versions in self._versions.items()
            }

    @property
    def config(self) -> model_server_config_pb2.ModelServerConfig:
        """A copy of the current config."""
        with self._changes:
            copy = model_server_config_pb2.ModelServerConfig()
            copy.CopyFrom(self._config)
            return copy

    # ------------------------------------------------------------------ config

    def reload_config(
        self,
        config: model_server_config_pb2.ModelServerConfig,
        *,
        wait_for_versions: bool = False,
    ) -> None:
        """Switches to a new config (start-up and `HandleReloadConfigRequest`).

        New models are loaded and awaited; removed models are unloaded; labels are replaced.
        A new model whose base path is missing or holds no integer version fails the call, or,
        with `wait_for_versions` (start-up, as the stock server does), is polled for every
        `file_system_poll_wait_seconds` (each poll logs why it is not there yet) until a version
        appears and loads or fails; with polling off (0) it fails at once, as nothing could
        ever pick a version up.

        Raises:
            ServingStatus: INVALID_ARGUMENT for a config that is not a model_config_list or is
                invalid, FAILED_PRECONDITION for a label on an unavailable version, NOT_FOUND for
                a new model without versions, UNKNOWN when new models did not become available.
        """
        if config.WhichOneof("config") != "model_config_list":
            raise invalid_argument(
                "ServerModelConfig type not supported by HandleReloadConfigRequest. Only "
                "ModelConfigList is currently supported"
            )
        validate_model_config_list(config)
        with self._changes:
            labels = self._new_labels(config)
            old = {m.name for m in self._config.model_config_list.config}
            new_models = [m for m in config.model_config_list.config if m.name not in old]
            if not wait_for_versions or self._poll_wait <= 0:
                for model in new_models:
                    _check_base_path(model)
            self._config = model_server_config_pb2.ModelServerConfig()
            self._config.CopyFrom(config)
            with self._lock:
                self._labels = labels
            self._poll_locked()
            names = [m.name for m in new_models]
            while any(not self.version_states(name) for name in names):
                if self._stop.wait(self._poll_wait):
                    return
                self._poll_locked()
            self._await_available(names)

    def _new_labels(self, config: model_server_config_pb2.ModelServerConfig) -> dict:
        labels: dict[str, dict[str, int]] = {}
        for model in config.model_config_list.config:
            states = {s.version: s.state for s in self.version_states(model.name)}
            for label, version in model.version_labels.items():
                allowed = False
                if self._allow_unavailable_labels:
                    existing = self._labels.get(model.name, {}).get(label)
                    allowed = existing is None or existing == version
                if not allowed and states.get(version) != State.AVAILABLE:
                    raise failed_precondition(
                        f"Request to assign label to version {version} of model {model.name}, "
                        "which is not currently available for inference"
                    )
                labels.setdefault(model.name, {})[label] = version
        return labels

    def _await_available(self, names: list[str]) -> None:
        failures = []
        for name in names:
            states = self.version_states(name)
            if any(s.state == State.AVAILABLE for s in states):
                continue
            failures.extend((name, s) for s in states if s.state == State.END)
        if failures:
            parts = "".join(
                f"{{name: {name} version: {s.version} due to error: {s.error_code.name}: "
                f"{s.error_message}}}, "
                for name, s in failures
            )
            raise ServingStatus(
                grpc.StatusCode.UNKNOWN,
                f"{len(failures)} model(s) did not become available: {{{parts}}}",
            )

    # ------------------------------------------------------------------ polling

    def poll(self) -> None:
        """One pass of the file system source over every configured model."""
        with self._changes:
            self._poll_locked()

    def _poll_locked(self) -> None:
        configured = {m.name: m for m in self._config.model_config_list.config}
        for name in list(self._versions):
            if name not in configured:
                self._converge(name, None, set())
        for name, model in configured.items():
            try:
                on_disk = list_versions(model.base_path)
            except OSError as error:
                # Stock logs this on every poll and keeps the current versions.
                reason = (
                    f"NOT_FOUND: {model.base_path} not found"
                    if not os.path.exists(model.base_path)
                    else error.strerror or str(error)
                )
                logger.error(
                    "FileSystemStoragePathSource encountered a filesystem access error: Could "
                    "not find base path %s for servable %s with error %s",
                    model.base_path,
                    name,
                    reason,
                )
                continue
            aspired = aspired_versions(model, on_disk)
            policy = model.model_version_policy
            if policy.WhichOneof("policy_choice") == "specific":
                for version in sorted(set(policy.specific.versions) - set(on_disk)):
                    logger.warning(
                        "Version %d of servable %s, which was requested to be served as a "
                        "'specific' version in the servable's version policy, was not found in "
                        "the file system",
                        version,
                        name,
                    )
            if not aspired:
                # Stock warns on every poll that finds nothing to serve.
                logger.warning(
                    "No versions of servable %s found under base path %s. Did you forget to name "
                    "your leaf directory as a number (eg. '/1/')?",
                    name,
                    model.base_path,
                )
            self._converge(name, model, aspired)

    def _converge(
        self, name: str, model: model_server_config_pb2.ModelConfig | None, aspired: set[int]
    ) -> None:
        """Applies the availability-preserving policy until it has nothing left to do."""
        with self._lock:
            versions = self._versions.setdefault(name, {})
            for version, entry in versions.items():
                if entry.failed and version not in aspired:
                    entry.failed = False  # gone from disk: may be tried again if it returns
        while not self._stop.is_set():
            with self._lock:
                ready = {v for v, e in versions.items() if e.state == State.AVAILABLE}
            aspired_ready = ready & aspired
            unaspired_ready = sorted(ready - aspired)
            if unaspired_ready and (aspired_ready or len(unaspired_ready) > 1 or not aspired):
                self._unload(name, unaspired_ready[0])
                continue
            with self._lock:
                new = sorted(
                    v
                    for v in aspired
                    if v not in ready and not (v in versions and versions[v].failed)
                )
            if not new or model is None:
                return
            self._load(name, model.base_path, new[-1])

    def _load(self, name: str, base_path: str, version: int) -> None:
        entry = _Version(state=State.LOADING)
        with self._lock:
            self._versions[name][version] = entry
        logger.info("Loading servable: {name: %s version: %d}", name, version)
        attempt = 0
        while True:
            try:
                loaded = self._loader(name, base_path, version)
                if hasattr(loaded.functions, "close"):
                    self._loaded_functions.add(loaded.functions)
                servable = self._prepare(loaded)
                break
            except (LoadError, ServingStatus) as error:
                code, message = error.code, getattr(error, "message", str(error))
            except Exception as error:  # a broken SavedModel may raise anything
                code, message = grpc.StatusCode.UNKNOWN, f"{type(error).__name__}: {error}"
            attempt += 1
            # Every failed attempt is logged at once (as stock's Retry() does), so a bad version
            # is visible long before the retries (default 5, one minute apart) run out.
            retry = (
                f" Retry {attempt} of {self._retries} in {self._retry_interval:g} s."
                if attempt <= self._retries
                else (f" Gave up after {self._retries} retries." if self._retries else "")
            )
            logger.error(
                "Loading servable: {name: %s version: %d} failed: %s: %s%s",
                name,
                version,
                code.name,
                message,
                retry,
            )
            if attempt > self._retries or self._stop.wait(self._retry_interval):
                with self._lock:
                    entry.state, entry.failed = State.END, True
                    entry.error_code, entry.error_message = code, message
                return
        with self._lock:
            entry.servable = servable
            entry.state = State.AVAILABLE
        logger.info("Successfully loaded servable version {name: %s version: %d}", name, version)

    def _prepare(self, servable: Servable) -> Servable:
        if self._scheduler is not None:
            functions = BatchingFunctions(
                servable.functions, servable.signature_defs, self._scheduler
            )
            servable = dataclasses.replace(servable, functions=functions)
        if self._warmup:
            start, compiled = time.perf_counter(), _xla_compilations()
            runs = run_warmup(servable, self._warmup_iterations)
            if runs and compiled is not None:
                logger.info(
                    "XLA compilations during the warm-up of %s: %d (process total %d)",
                    servable.path,
                    _xla_compilations() - compiled,
                    _xla_compilations(),
                )
            if runs:
                # Stock's line (servables/tensorflow/saved_model_warmup_util.cc).
                logger.info(
                    "Finished reading warmup data for model at %s. Number of warmup records "
                    "read: %d. Elapsed time (microseconds): %d.",
                    servable.path,
                    runs // max(self._warmup_iterations, 1),
                    (time.perf_counter() - start) * 1e6,
                )
        return servable

    def _unload(self, name: str, version: int) -> None:
        with self._lock:
            entry = self._versions[name][version]
            entry.state = State.UNLOADING
            servable, entry.servable = entry.servable, None
            entry.state = State.END
            entry.error_code, entry.error_message = grpc.StatusCode.OK, ""
        if servable is not None and isinstance(servable.functions, BatchingFunctions):
            servable.functions.close()
        logger.info("Unloaded servable version {name: %s version: %d}", name, version)

    # ------------------------------------------------------------------ background thread

    def start(self) -> None:
        """Starts the file system poller (and the config file poller when configured)."""
        if self._poll_wait > 0:
            self._spawn("fs-poller", self._poll_wait, self.poll)
        if self._config_file and self._config_poll_wait > 0:
            self._spawn("config-poller", self._config_poll_wait, self._reload_config_file)

    def _spawn(self, name: str, interval: float, action: Callable[[], Any]) -> None:
        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    action()
                except ServingStatus as status:
                    logger.error("%s: %s", name, status)
                except Exception:  # keep polling whatever one pass hit
                    logger.exception("%s failed", name)

        thread = threading.Thread(target=loop, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _reload_config_file(self) -> None:
        config = read_model_server_config(self._config_file)
        if config != self._config:
            self.reload_config(config)

    def interrupt(self) -> None:
        """Makes a start-up or reload stop waiting (for a base path, between load retries) and
        stops loading further versions; safe to call from a signal handler (it only sets an
        event). `stop()` still has to be called."""
        self._stop.set()

    def cancel_runs(self) -> None:
        """Cancels every model run in flight and fails every queued batch task (UNAVAILABLE);
        later requests fail the same way. The last step of a shutdown's drain."""
        self._stop.set()
        if self._scheduler is not None:
            self._scheduler.cancel_queued(unavailable(SHUTTING_DOWN_MESSAGE))
        for functions in list(self._loaded_functions):
            functions.close()

    def stop(self) -> None:
        """Stops polling and the batch threads (loaded versions stay usable until dropped)."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        if self._scheduler is not None:
            self._scheduler.stop()

    @property
    def scheduler(self) -> BatchScheduler | None:
        """The shared batch scheduler (None without batching)."""
        return self._scheduler


def _check_base_path(model: model_server_config_pb2.ModelConfig) -> None:
    """Stock's start-up checks (`fail_if_zero_versions_at_startup`), with its messages."""
    if not os.path.isdir(model.base_path):
        raise ServingStatus(
            grpc.StatusCode.NOT_FOUND,
            f"Could not find base path {model.base_path} for servable {model.name}",
        )
    if not list_versions(model.base_path):
        raise ServingStatus(
            grpc.StatusCode.NOT_FOUND,
            f"No versions of servable {model.name} found under base path {model.base_path}. "
            "Did you forget to name your leaf directory as a number (eg. '/1/')?",
        )
