"""Model warm-up: replay `assets.extra/tf_serving_warmup_requests` before a version serves.

As stock TensorFlow Serving (`servables/tensorflow/saved_model_warmup.cc` and
`saved_model_warmup_util.cc`): the file is a TFRecord of `PredictionLog` messages; each record's
request (predict, classify, regress or multi_inference log) is run against the freshly loaded
version, `num_request_iterations` times, before the version becomes AVAILABLE. A missing file
means no warm-up. More than 1000 records, a record that does not parse, an unsupported log type
or a failing request fail the load, with stock's codes and messages. The file's location and
record limit are defined in `keras_attn.formats`, the module `keras-attn export` writes them with.
"""

from __future__ import annotations

import os

import grpc
from tensorflow_serving.apis import prediction_log_pb2

from keras_attn.formats import (  # noqa: F401  (re-exported: the record format lives there)
    MAX_WARMUP_RECORDS,
    WARMUP_DIRECTORY,
    WARMUP_FILENAME,
    warmup_path,
)
from keras_attn.serving.core import ServingCore, StaticSource
from keras_attn.serving.servable import Servable
from keras_attn.serving.status import ServingStatus, invalid_argument


def read_warmup_records(path: str) -> list[prediction_log_pb2.PredictionLog]:
    """The PredictionLogs of a warm-up file.

    Raises:
        ServingStatus: INVALID_ARGUMENT beyond 1000 records, DATA_LOSS for a corrupt file or
            a record that is not a PredictionLog.
    """
    import tensorflow as tf

    logs = []
    try:
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            if len(logs) >= MAX_WARMUP_RECORDS:
                # "exceeeds" is stock's spelling.
                raise invalid_argument(
                    f"Number of warmup records exceeeds the maximum ({MAX_WARMUP_RECORDS}) "
                    f"at {path}"
                )
            log = prediction_log_pb2.PredictionLog()
            try:
                log.ParseFromString(record)
            except Exception:  # protobuf's DecodeError: the record is not a PredictionLog.
                raise ServingStatus(
                    grpc.StatusCode.DATA_LOSS,
                    f"Failed to parse warmup record: {record!r} from {path}",
                ) from None
            logs.append(log)
    except tf.errors.OpError as error:
        raise ServingStatus(grpc.StatusCode.DATA_LOSS, error.message) from None
    return logs


def run_warmup(servable: Servable, num_request_iterations: int = 1) -> int:
    """Replays the servable's warm-up requests; returns how many requests ran (0 without file).

    The requests run against this servable whatever model name or version they carry, as the
    stock warm-up runs them on the bundle being loaded.

    Raises:
        ServingStatus: the file cannot be read, or a request failed.
    """
    path = warmup_path(servable.path)
    if not os.path.isfile(path):
        return 0
    records = read_warmup_records(path)
    core = ServingCore(_ThisServable(servable), limits=None)  # the model's own requests
    runs = 0
    for _ in range(max(num_request_iterations, 1)):
        for log in records:
            kind = log.WhichOneof("log_type")
            if kind == "predict_log":
                core.predict(log.predict_log.request)
            elif kind == "classify_log":
                core.classify(log.classify_log.request)
            elif kind == "regress_log":
                core.regress(log.regress_log.request)
            elif kind == "multi_inference_log":
                core.multi_inference(log.multi_inference_log.request)
            else:
                number = log.DESCRIPTOR.fields_by_name[kind].number if kind else 0
                raise ServingStatus(
                    grpc.StatusCode.UNIMPLEMENTED, f"Unsupported log_type for warmup: {number}"
                )
            runs += 1
    return runs


class _ThisServable(StaticSource):
    """Answers every ModelSpec with one servable (warm-up requests name no particular one)."""

    def __init__(self, servable: Servable):
        super().__init__([servable])
        self._only = servable

    def servable(self, model_spec) -> Servable:
        return self._only
