"""A gRPC client for the exported translator, on stock TensorFlow Serving or `keras-attn serve`.

Written in small pure steps: build the `PredictRequest` (`make_translate_request`), send it, read
the strings back (`parse_translate_response`). `TranslatorClient` puts them together and turns
every RPC failure into a `ServingError` carrying the gRPC code and message; a server that cannot
be reached raises the subclass `ServerUnavailableError`.

Example:

    with TranslatorClient("localhost:8500") as client:
        print(client.translate(["ein kleiner Test"]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from keras_attn.serving.tensors import (
    dtype_name,
    shape_dims,
    tensor_proto_to_ndarray,
)

TEXT_INPUT = "text"
TRANSLATION_OUTPUT = "translation"
DEFAULT_SIGNATURE = "serving_default"
ALIGNMENT_SIGNATURE = "translate_with_alignment"
MAX_MESSAGE_LENGTH = 2**31 - 1


class ServingError(Exception):
    """A failed call to a model server.

    Attributes:
        code: the `grpc.StatusCode` of the failure.
        message: the server's (or gRPC's) message.
        target: the `host:port` that was called.
    """

    def __init__(self, code: grpc.StatusCode, message: str, target: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.target = target


class ServerUnavailableError(ServingError):
    """No model server answered at the target (gRPC status UNAVAILABLE)."""


def make_translate_request(
    texts: Sequence[str | bytes], model_name: str, signature_name: str = DEFAULT_SIGNATURE
) -> predict_pb2.PredictRequest:
    """A PredictRequest feeding `texts` as the translator's `text` input (DT_STRING, [batch])."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    tensor = tf.make_tensor_proto(list(texts), dtype=tf.string, shape=[len(texts)])
    request.inputs[TEXT_INPUT].CopyFrom(tensor)
    return request


def _decode(array: np.ndarray) -> np.ndarray:
    """An object array of `bytes` as an object array of `str` (UTF-8); other arrays unchanged."""
    if array.dtype != np.dtype(object):
        return array
    decoded = np.empty(array.shape, dtype=object)
    for index, value in np.ndenumerate(array):
        decoded[index] = bytes(value).decode("utf-8", errors="replace")
    return decoded


def parse_response_outputs(response: predict_pb2.PredictResponse) -> dict[str, np.ndarray]:
    """Every output of a PredictResponse as a NumPy array (strings decoded to `str`)."""
    return {
        name: _decode(tensor_proto_to_ndarray(proto)) for name, proto in response.outputs.items()
    }


def parse_translate_response(response: predict_pb2.PredictResponse) -> list[str]:
    """The `translation` output of a PredictResponse as a list of strings, one per input text."""
    if TRANSLATION_OUTPUT not in response.outputs:
        raise ValueError(
            f"The response has no '{TRANSLATION_OUTPUT}' output "
            f"(outputs: {sorted(response.outputs)})."
        )
    return list(_decode(tensor_proto_to_ndarray(response.outputs[TRANSLATION_OUTPUT])).reshape(-1))


def _signature_summary(signature: Any) -> dict[str, Any]:
    def describe(infos: Any) -> dict[str, Any]:
        return {
            key: {"dtype": dtype_name(info.dtype), "shape": shape_dims(info.tensor_shape)}
            for key, info in sorted(infos.items())
        }

    return {
        "method_name": signature.method_name,
        "inputs": describe(signature.inputs),
        "outputs": describe(signature.outputs),
    }


class TranslatorClient:
    """Queries a served translator over gRPC.

    Args:
        target: the server as `host:port`, e.g. `localhost:8500`, or any gRPC target such as
            `dns:///translator-serving-headless:8500`: calls are spread round-robin over every
            address the name resolves to (client-side load balancing over a Kubernetes headless
            Service; gRPC would otherwise send every call over one connection to one replica).
        model_name: the served model's name (`default`, as `keras-attn serve` and
            `tensorflow_model_server` name a model when not told otherwise).
        timeout: seconds each call may take.

    Every method raises `ServingError` (or `ServerUnavailableError`) when the call fails.
    """

    def __init__(self, target: str, model_name: str = "default", timeout: float = 30.0):
        self.target = target
        self.model_name = model_name
        self.timeout = timeout
        self._channel = grpc.insecure_channel(
            target,
            options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_LENGTH),
                ("grpc.max_receive_message_length", MAX_MESSAGE_LENGTH),
                ("grpc.lb_policy_name", "round_robin"),
            ],
        )
        self._prediction = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)
        self._models = model_service_pb2_grpc.ModelServiceStub(self._channel)

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as error:
            code = error.code() if callable(getattr(error, "code", None)) else None
            code = code or grpc.StatusCode.UNKNOWN
            message = error.details() if callable(getattr(error, "details", None)) else ""
            error_class = (
                ServerUnavailableError if code == grpc.StatusCode.UNAVAILABLE else ServingError
            )
            raise error_class(code, message or "", self.target) from None

    def predict(self, texts: Sequence[str | bytes], signature_name: str) -> dict[str, np.ndarray]:
        """Every output of `signature_name` for `texts`, as NumPy arrays (strings as `str`)."""
        request = make_translate_request(texts, self.model_name, signature_name)
        return parse_response_outputs(self._call(self._prediction.Predict, request))

    def translate(
        self, texts: Sequence[str | bytes], signature_name: str = DEFAULT_SIGNATURE
    ) -> list[str]:
        """Translates a batch of texts; one translation per text, in order."""
        request = make_translate_request(texts, self.model_name, signature_name)
        return parse_translate_response(self._call(self._prediction.Predict, request))

    def translate_with_alignment(self, texts: Sequence[str | bytes]) -> dict[str, np.ndarray]:
        """Translations with tokens, scores and attention alignments.

        Returns:
            A dict of NumPy arrays: `translation` (batch,) str, `tokens` (batch, T) str,
            `scores` (batch,) float32, `alignment` (batch, T, S) float32 and `source_tokens`
            (batch, S) str; token matrices are padded with empty strings.
        """
        return self.predict(texts, ALIGNMENT_SIGNATURE)

    def metadata(self) -> dict[str, dict[str, Any]]:
        """The served signatures: name -> {method_name, inputs, outputs}.

        Inputs and outputs map each key to `{"dtype": "DT_STRING", "shape": [-1]}` (`shape` is
        None for an unknown rank). Internal signatures (names starting with `__`, such as
        `__saved_model_init_op`) are left out.
        """
        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        request.model_spec.name = self.model_name
        response = self._call(self._prediction.GetModelMetadata, request)
        signature_def_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signature_def_map)
        return {
            name: _signature_summary(signature)
            for name, signature in sorted(signature_def_map.signature_def.items())
            if not name.startswith("__")
        }

    def status(self) -> list[dict[str, Any]]:
        """The state of each version of the model.

        Returns:
            One dict per version: `{"version": 1, "state": "AVAILABLE", "error_code": "OK",
            "error_message": ""}`.
        """
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = self.model_name
        response = self._call(self._models.GetModelStatus, request)
        states = get_model_status_pb2.ModelVersionStatus.State
        return [
            {
                "version": status.version,
                "state": states.Name(status.state),
                "error_code": _error_code_name(status.status),
                "error_message": status.status.error_message,
            }
            for status in response.model_version_status
        ]

    def close(self) -> None:
        """Closes the channel."""
        self._channel.close()

    def __enter__(self) -> TranslatorClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _error_code_name(status: Any) -> str:
    """The name of a StatusProto's `error_code` (a `tensorflow.error.Code`), e.g. `OK`."""
    codes = status.DESCRIPTOR.fields_by_name["error_code"].enum_type.values_by_number
    value = codes.get(status.error_code)
    return value.name if value is not None else str(status.error_code)
