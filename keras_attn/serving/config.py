"""The stock model server's configuration files: model config, batching and monitoring.

`--model_config_file` holds a `ModelServerConfig` (text format), the message shipped in
`tensorflow_serving.config.model_server_config_pb2`. `--batching_parameters_file` holds a
`BatchingParameters` and `--monitoring_config_file` a `MonitoringConfig`; tensorflow-serving-api
does not ship `servables/tensorflow/session_bundle_config.proto` nor
`config/monitoring_config.proto`, so the two messages are declared below in the schema's own
terms (same package, names, field numbers and types), which is all `text_format` needs to accept
exactly the files the stock server accepts.

Validation follows tensorflow/serving `model_servers/server_core.cc` (`ValidateModelConfigList`,
`GetPlatform`, `CreateStoragePathRoutes`) and `servables/tensorflow/bundle_factory_util.cc`
(allowed batch sizes), with the same status codes and messages. Version policies follow
`sources/storage_path/file_system_storage_path_source.cc`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message,
    message_factory,
    text_format,
    wrappers_pb2,
)
from tensorflow_serving.config import model_server_config_pb2

from keras_attn.serving.status import invalid_argument, not_found

TENSORFLOW_PLATFORM = "tensorflow"
DEFAULT_PROMETHEUS_PATH = "/monitoring/prometheus/metrics"
ModelServerConfig = model_server_config_pb2.ModelServerConfig
ModelConfig = model_server_config_pb2.ModelConfig

# The messages of tensorflow/serving's `session_bundle_config.proto` and `monitoring_config.proto`
# that the server reads, as `FileDescriptorProto`s in text format.
_SESSION_BUNDLE_CONFIG_PROTO = """
name: "tensorflow_serving/servables/tensorflow/session_bundle_config.proto"
package: "tensorflow.serving"
syntax: "proto3"
dependency: "google/protobuf/wrappers.proto"
message_type {
  name: "BatchingParameters"
  field { name: "max_batch_size" number: 1 label: LABEL_OPTIONAL
          type: TYPE_MESSAGE type_name: ".google.protobuf.Int64Value" }
  field { name: "batch_timeout_micros" number: 2 label: LABEL_OPTIONAL
          type: TYPE_MESSAGE type_name: ".google.protobuf.Int64Value" }
  field { name: "max_enqueued_batches" number: 3 label: LABEL_OPTIONAL
          type: TYPE_MESSAGE type_name: ".google.protobuf.Int64Value" }
  field { name: "num_batch_threads" number: 4 label: LABEL_OPTIONAL
          type: TYPE_MESSAGE type_name: ".google.protobuf.Int64Value" }
  field { name: "thread_pool_name" number: 5 label: LABEL_OPTIONAL
          type: TYPE_MESSAGE type_name: ".google.protobuf.StringValue" }
  field { name: "allowed_batch_sizes" number: 6 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "pad_variable_length_inputs" number: 7 label: LABEL_OPTIONAL type: TYPE_BOOL }
}
"""
_MONITORING_CONFIG_PROTO = """
name: "tensorflow_serving/config/monitoring_config.proto"
package: "tensorflow.serving"
syntax: "proto3"
message_type {
  name: "PrometheusConfig"
  field { name: "enable" number: 1 label: LABEL_OPTIONAL type: TYPE_BOOL }
  field { name: "path" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
}
message_type {
  name: "MonitoringConfig"
  field { name: "prometheus_config" number: 1 label: LABEL_OPTIONAL
          type: TYPE_MESSAGE type_name: ".tensorflow.serving.PrometheusConfig" }
}
"""


def _message_classes() -> dict[str, type[message.Message]]:
    """`tensorflow.serving.BatchingParameters` and `MonitoringConfig`, from a private pool."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    for schema in (_SESSION_BUNDLE_CONFIG_PROTO, _MONITORING_CONFIG_PROTO):
        pool.Add(text_format.Parse(schema, descriptor_pb2.FileDescriptorProto()))
    return {
        name: message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"tensorflow.serving.{name}")
        )
        for name in ("BatchingParameters", "MonitoringConfig")
    }


_CLASSES = _message_classes()
BatchingParameters = _CLASSES["BatchingParameters"]
MonitoringConfig = _CLASSES["MonitoringConfig"]


def read_text_proto(path: str, proto: message.Message) -> message.Message:
    """Parses a text-format proto file into `proto`.

    Raises:
        ServingStatus: INVALID_ARGUMENT `Invalid protobuf file: '<path>'` as stock
            (`server.cc::ParseProtoTextFile`), or NOT_FOUND when the file cannot be read.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as error:
        raise not_found(f"{path}; {error.strerror or 'cannot read file'}") from None
    try:
        text_format.Parse(text, proto)
    except text_format.ParseError:
        raise invalid_argument(f"Invalid protobuf file: '{path}'") from None
    return proto


def read_model_server_config(path: str) -> model_server_config_pb2.ModelServerConfig:
    """The `ModelServerConfig` in a `--model_config_file`."""
    return read_text_proto(path, ModelServerConfig())


def single_model_config(name: str, base_path: str) -> model_server_config_pb2.ModelServerConfig:
    """The config `--model_name`/`--model_base_path` stand for (`BuildSingleModelConfig`)."""
    config = ModelServerConfig()
    config.model_config_list.config.add(
        name=name, base_path=os.path.abspath(base_path), model_platform=TENSORFLOW_PLATFORM
    )
    return config


def validate_model_config_list(config: model_server_config_pb2.ModelServerConfig) -> None:
    """Refuses a config the stock `ServerCore::ReloadConfig` refuses, with its message.

    Raises:
        ServingStatus: INVALID_ARGUMENT for a model listed twice, a relative base path or a
            missing/unsupported platform.
    """
    names: set[str] = set()
    for model in config.model_config_list.config:
        if model.name in names:
            raise invalid_argument(
                f"Illegal to list model {model.name} multiple times in config list"
            )
        names.add(model.name)
    for model in config.model_config_list.config:
        if not os.path.isabs(model.base_path) and "://" not in model.base_path:
            raise invalid_argument(
                f"Expected model {model.name} to have an absolute path or URI; "
                f"got base_path()={model.base_path}"
            )
    for model in config.model_config_list.config:
        platform = _platform(model)
        if platform != TENSORFLOW_PLATFORM:
            raise invalid_argument(f"Model {model.name} requests unsupported platform {platform}")


def _platform(model: model_server_config_pb2.ModelConfig) -> str:
    if model.model_type != model_server_config_pb2.MODEL_TYPE_UNSPECIFIED:
        if model.model_platform:
            raise invalid_argument(
                "Illegal setting both ModelServerConfig::model_type (deprecated) "
                "and ModelServerConfig::model_platform."
            )
        if model.model_type == model_server_config_pb2.TENSORFLOW:
            return TENSORFLOW_PLATFORM
        raise invalid_argument(
            f"ModelServerConfig::model_type choice {model.model_type} not supported."
        )
    if not model.model_platform:
        raise invalid_argument(
            "Illegal setting neither ModelServerConfig::model_type (deprecated) "
            "nor ModelServerConfig::model_platform."
        )
    return model.model_platform


def aspired_versions(
    model: model_server_config_pb2.ModelConfig, on_disk: Iterable[int]
) -> set[int]:
    """The versions a model's version policy wants loaded, out of those on disk.

    `latest { num_versions: N }` (the default, N at least 1): the N highest; `all {}`: every one;
    `specific { versions: ... }`: those listed that exist.
    """
    versions = sorted(set(on_disk), reverse=True)
    policy = model.model_version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return set(versions)
    if choice == "specific":
        return set(versions) & set(policy.specific.versions)
    count = max(policy.latest.num_versions, 1) if choice == "latest" else 1
    return set(versions[:count])


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """Resolved `BatchingParameters` with the stock scheduler's defaults for unset fields.

    Defaults follow `batching/batching_session.h` / `shared_batch_scheduler.h`:
    max_batch_size 1000, batch_timeout_micros 0, max_enqueued_batches 10, and one batch thread
    per CPU.
    """

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = dataclasses.field(default_factory=lambda: os.cpu_count() or 1)
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False

    @classmethod
    def from_proto(cls, parameters: message.Message) -> BatchingOptions:
        """Resolves and validates a `BatchingParameters` message.

        Raises:
            ServingStatus: INVALID_ARGUMENT for non-increasing allowed batch sizes or a last
                allowed size different from max_batch_size (stock messages).
        """
        defaults = cls()
        values = {}
        for name in (
            "max_batch_size",
            "batch_timeout_micros",
            "max_enqueued_batches",
            "num_batch_threads",
        ):
            if parameters.HasField(name):
                values[name] = int(getattr(parameters, name).value)
        options = dataclasses.replace(
            defaults,
            **values,
            allowed_batch_sizes=tuple(parameters.allowed_batch_sizes),
            pad_variable_length_inputs=bool(parameters.pad_variable_length_inputs),
        )
        sizes = options.allowed_batch_sizes
        if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
            raise invalid_argument("allowed_batch_sizes entries must be monotonically increasing")
        if sizes and sizes[-1] != options.max_batch_size:
            raise invalid_argument(
                "Last entry in allowed_batch_sizes must match max_batch_size; last entry was "
                f"{sizes[-1]}; expected {options.max_batch_size}"
            )
        for name in ("max_batch_size", "max_enqueued_batches", "num_batch_threads"):
            if getattr(options, name) <= 0:
                raise invalid_argument(f"{name} must be positive")
        return options


def read_batching_options(path: str | None) -> BatchingOptions:
    """The batching options of a `--batching_parameters_file` (defaults when None)."""
    if not path:
        return BatchingOptions()
    return BatchingOptions.from_proto(read_text_proto(path, BatchingParameters()))


def read_prometheus_path(path: str | None) -> str | None:
    """The Prometheus metrics path a `--monitoring_config_file` enables, or None if disabled."""
    if not path:
        return None
    config = read_text_proto(path, MonitoringConfig())
    if not config.prometheus_config.enable:
        return None
    return config.prometheus_config.path or DEFAULT_PROMETHEUS_PATH
