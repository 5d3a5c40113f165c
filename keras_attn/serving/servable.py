"""Finding and loading one version of a SavedModel, as TensorFlow Serving's file system source does.

A model lives in `BASE_PATH/<version>/` where `<version>` is a directory named by a non-negative
integer; other entries are ignored. With the stock default version policy (`latest { 1 }`), only
the highest version is loaded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import numpy as np
from google.protobuf import message, text_format
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

from keras_attn.serving.deadline import deadline_exceeded, remaining_seconds
from keras_attn.serving.status import (
    SHUTTING_DOWN_MESSAGE,
    ServingStatus,
    code_from_number,
    unavailable,
)
from keras_attn.serving.tensors import as_ndarray

SERVE_TAG = "serve"
INIT_OP_SIGNATURE_KEY = "__saved_model_init_op"


class LoadError(Exception):
    """A version could not be found or loaded (the message is one line for the user).

    Args:
        message: the message, worded as TensorFlow's SavedModel loader or stock TensorFlow
            Serving's file system source words it.
        code: the status code of the failure (NOT_FOUND for missing files, as stock).
    """

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.NOT_FOUND):
        super().__init__(message)
        self.message = message
        self.code = code


@dataclasses.dataclass(frozen=True)
class Servable:
    """One loaded model version.

    Attributes:
        name: the model name clients put in `ModelSpec.name`.
        version: the integer version (the directory name).
        path: the version directory.
        signature_defs: every SignatureDef of the `serve` MetaGraph, as stored (the stock server
            answers GetModelMetadata with exactly this map).
        functions: runs the signatures (`SignatureFunctions`, or an object with the same
            `get(key)`, e.g. a batching wrapper).
    """

    name: str
    version: int
    path: str
    signature_defs: dict[str, meta_graph_pb2.SignatureDef]
    functions: SignatureFunctions


def list_versions(base_path: str) -> list[int]:
    """The integer versions under `base_path`, ascending; non-integer entries are ignored."""
    versions = []
    for entry in os.listdir(base_path):
        if entry.isascii() and entry.isdigit() and os.path.isdir(os.path.join(base_path, entry)):
            versions.append(int(entry))
    return sorted(versions)


def latest_version(name: str, base_path: str) -> int:
    """The highest integer version under `base_path`.

    Raises:
        LoadError: the base path does not exist or holds no integer-named directory.
    """
    if not os.path.isdir(base_path):
        raise LoadError(f"Could not find base path {base_path} for servable {name}")
    versions = list_versions(base_path)
    if not versions:
        raise LoadError(
            f"No versions of servable {name} found under base path {base_path}. "
            "Did you forget to name your leaf directory as a number (eg. '/1/')?"
        )
    return versions[-1]


def read_signature_defs(path: str) -> dict[str, meta_graph_pb2.SignatureDef]:
    """Reads the SignatureDefs of the `serve` MetaGraph from `saved_model.pb` (or `.pbtxt`).

    Raises:
        LoadError: no SavedModel file, or no MetaGraph tagged `serve`.
    """
    saved_model = saved_model_pb2.SavedModel()
    binary = os.path.join(path, "saved_model.pb")
    text = os.path.join(path, "saved_model.pbtxt")
    # Messages and codes of TensorFlow's cc/saved_model/reader.cc and core/platform/env.cc.
    try:
        if os.path.isfile(binary):
            with open(binary, "rb") as f:
                saved_model.ParseFromString(f.read())
        elif os.path.isfile(text):
            with open(text, encoding="utf-8") as f:
                text_format.Parse(f.read(), saved_model)
        else:
            raise LoadError(
                "Could not find SavedModel .pb or .pbtxt at supplied export directory path: "
                f"{path}. Check that the directory exists and that you have the right "
                "permissions for accessing it."
            )
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError):
        kind = "binary" if os.path.isfile(binary) else "text"
        name = binary if kind == "binary" else text
        raise LoadError(f"Can't parse {name} as {kind} proto", grpc.StatusCode.DATA_LOSS) from None
    for meta_graph in saved_model.meta_graphs:
        if list(meta_graph.meta_info_def.tags) == [SERVE_TAG]:
            return dict(meta_graph.signature_def)
    raise LoadError(
        f"Could not find meta graph def matching supplied tags: {{ {SERVE_TAG} }}. To inspect "
        "available tag-sets in the SavedModel, please use the SavedModel CLI: `saved_model_cli`"
    )


def load_servable(name: str, base_path: str, version: int | None = None) -> Servable:
    """Loads `version` (by default the latest) of the SavedModel under `base_path`.

    The `serve` MetaGraph is loaded into a TensorFlow session of its own, as stock TensorFlow
    Serving loads a `SavedModelBundle`; `tensorflow_text` is imported first when installed, so
    graphs using its ops load.

    Raises:
        LoadError: no version to load, or TensorFlow could not load it.
    """
    import tensorflow as tf

    try:
        import tensorflow_text  # noqa: F401  (registers the tf-text ops)
    except ImportError:
        pass

    if version is None:
        version = latest_version(name, base_path)
    path = os.path.join(base_path, str(version))
    signature_defs = read_signature_defs(path)
    graph = tf.Graph()
    session = tf.compat.v1.Session(
        graph=graph, config=tf.compat.v1.ConfigProto(allow_soft_placement=True)
    )
    try:
        with graph.as_default(), _quiet_tensorflow_logger():
            tf.compat.v1.saved_model.loader.load(session, [SERVE_TAG], path)
    except Exception as error:  # TensorFlow raises many types here; all mean "cannot load".
        session.close()
        text = getattr(error, "message", None) or str(error)
        first_line = text.strip().splitlines()[0] if text.strip() else type(error).__name__
        code = grpc.StatusCode.UNKNOWN
        if isinstance(error, tf.errors.OpError):
            code = code_from_number(error.error_code)
        raise LoadError(first_line, code) from error
    functions = SignatureFunctions(session, signature_defs)
    return Servable(name, version, path, signature_defs, functions)


@contextlib.contextmanager
def _quiet_tensorflow_logger() -> Iterator[None]:
    """Silences TensorFlow's Python logger (the v1 loader's deprecation notice) for a block."""
    import tensorflow as tf

    logger = tf.get_logger()
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


class SignatureFunctions:
    """The signatures of one loaded SavedModel, run in its TensorFlow session.

    `get(key)` returns a function taking the signature's inputs by alias (NumPy arrays or
    tensors) and returning its outputs by alias as NumPy arrays: one `Session.run` feeding and
    fetching the SignatureDef's tensor names, as stock TensorFlow Serving's `Session::Run`. The
    current request's deadline (`keras_attn.serving.deadline`) becomes the run's
    `RunOptions.timeout_in_ms`, so a run whose deadline passes is cancelled between two ops and
    fails with DEADLINE_EXCEEDED; `close()` cancels every run in flight (they fail with
    CANCELLED) and refuses later ones.

    Args:
        session: the session the SavedModel was loaded into.
        signature_defs: the SignatureDefs of its `serve` MetaGraph.
    """

    def __init__(self, session: Any, signature_defs: dict[str, meta_graph_pb2.SignatureDef]):
        self._session = session
        self._signature_defs = signature_defs
        self._closed = False

    def get(self, key: str) -> Callable[..., dict[str, np.ndarray]] | None:
        """The function of a signature key, or None (unknown keys, `__saved_model_init_op`)."""
        signature = self._signature_defs.get(key)
        if signature is None or key == INIT_OP_SIGNATURE_KEY:
            return None
        fetches = {alias: info.name for alias, info in signature.outputs.items()}

        def run(**inputs: Any) -> dict[str, np.ndarray]:
            import tensorflow as tf

            feeds = {signature.inputs[alias].name: as_ndarray(v) for alias, v in inputs.items()}
            options = None
            left = remaining_seconds()
            if left is not None:
                if left <= 0:
                    raise deadline_exceeded()
                options = tf.compat.v1.RunOptions(timeout_in_ms=max(math.ceil(left * 1000), 1))
            if self._closed:
                raise _closed()
            try:
                return self._session.run(fetches, feeds, options=options)
            except RuntimeError:  # "Attempted to use a closed Session."
                if self._closed:
                    raise _closed() from None
                raise

        return run

    def close(self) -> None:
        """Cancels the runs in flight and refuses new ones (server shutdown)."""
        self._closed = True
        self._session.close()


def _closed() -> ServingStatus:
    return unavailable(SHUTTING_DOWN_MESSAGE)
