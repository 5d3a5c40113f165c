"""The translator client: its pure request/response steps, and `TranslatorClient` on a server."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

from keras_attn.serving.client import (
    ServerUnavailableError,
    ServingError,
    TranslatorClient,
    make_translate_request,
    parse_translate_response,
)
from keras_attn.serving.server import ModelServer

from .conftest import LATEST_VERSION, MODEL_NAME

TEXTS = ["the small cat", "hello world", "Grüße aus Köln"]


def test_make_translate_request_builds_the_stock_request():
    request = make_translate_request(["a b", "ünï"], "translator", signature_name="translate")

    assert request.model_spec.name == "translator"
    assert request.model_spec.signature_name == "translate"
    assert list(request.inputs) == ["text"]
    tensor = request.inputs["text"]
    assert tensor.dtype == tf.string.as_datatype_enum
    assert [d.size for d in tensor.tensor_shape.dim] == [2]
    assert list(tensor.string_val) == [b"a b", "ünï".encode()]
    assert tf.make_ndarray(tensor).tolist() == [b"a b", "ünï".encode()]


def test_make_translate_request_with_an_empty_batch():
    tensor = make_translate_request([], "translator").inputs["text"]
    assert [d.size for d in tensor.tensor_shape.dim] == [0]
    assert tensor.string_val == []


def test_parse_translate_response_decodes_utf8():
    response = predict_pb2.PredictResponse()
    response.outputs["translation"].CopyFrom(tf.make_tensor_proto(["b a", "Köln"], dtype=tf.string))
    response.outputs["scores"].CopyFrom(tf.make_tensor_proto([1.0, 2.0]))
    assert parse_translate_response(response) == ["b a", "Köln"]


def test_parse_translate_response_without_translation_output():
    response = predict_pb2.PredictResponse()
    response.outputs["scores"].CopyFrom(tf.make_tensor_proto([1.0]))
    with pytest.raises(ValueError, match="no 'translation' output"):
        parse_translate_response(response)


def _decoded(array: np.ndarray) -> np.ndarray:
    if array.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array)
    return array


def test_client_translates_like_the_saved_model(target, reference):
    expected = reference.signatures["serving_default"](text=tf.constant(TEXTS))
    with TranslatorClient(target, MODEL_NAME, timeout=20) as client:
        translations = client.translate(TEXTS)
    assert translations == [t.decode("utf-8") for t in expected["translation"].numpy()]
    assert translations[2] == "Köln aus Grüße"


def test_client_translate_with_alignment(target, reference):
    expected = reference.signatures["translate_with_alignment"](text=tf.constant(TEXTS))
    with TranslatorClient(target, MODEL_NAME) as client:
        outputs = client.translate_with_alignment(TEXTS)
    assert sorted(outputs) == ["alignment", "scores", "source_tokens", "tokens", "translation"]
    for key, tensor in expected.items():
        np.testing.assert_array_equal(outputs[key], _decoded(tensor.numpy()))
    assert outputs["alignment"].dtype == np.float32
    assert outputs["alignment"].shape == (3, 3, 3)
    assert outputs["tokens"][0].tolist() == ["cat", "small", "the"]


def test_client_metadata_and_status(target):
    with TranslatorClient(target, MODEL_NAME) as client:
        metadata = client.metadata()
        status = client.status()
    assert sorted(metadata) == ["serving_default", "translate", "translate_with_alignment"]
    alignment = metadata["translate_with_alignment"]
    assert alignment["inputs"] == {"text": {"dtype": "DT_STRING", "shape": [-1]}}
    assert alignment["outputs"]["alignment"] == {"dtype": "DT_FLOAT", "shape": [-1, -1, -1]}
    assert alignment["outputs"]["tokens"] == {"dtype": "DT_STRING", "shape": [-1, -1]}
    assert alignment["method_name"] == "tensorflow/serving/predict"
    assert status == [
        {"version": LATEST_VERSION, "state": "AVAILABLE", "error_code": "OK", "error_message": ""}
    ]


def test_client_errors_carry_code_and_message(target):
    with TranslatorClient(target, "nope") as client:
        with pytest.raises(ServingError) as info:
            client.translate(["a"])
    assert not isinstance(info.value, ServerUnavailableError)
    assert info.value.code == grpc.StatusCode.NOT_FOUND
    assert info.value.message == "Servable not found for request: Latest(nope)"
    assert info.value.target == target

    with TranslatorClient(target, MODEL_NAME) as client:
        with pytest.raises(ServingError) as info:
            client.translate(["a"], signature_name="nope")
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION


def test_client_reports_a_server_that_is_down(closed_port):
    with TranslatorClient(f"127.0.0.1:{closed_port}", timeout=10) as client:
        with pytest.raises(ServerUnavailableError) as info:
            client.translate(["a"])
    assert isinstance(info.value, ServingError)
    assert info.value.code == grpc.StatusCode.UNAVAILABLE


def test_calls_are_spread_round_robin_over_every_resolved_address(server, model_base_path):
    # Two replicas behind one name: an `ipv4:` target lists both, as DNS lists the pods of a
    # Kubernetes headless Service for `dns:///...`.
    with ModelServer(MODEL_NAME, model_base_path, port=0) as replica:
        target = f"ipv4:127.0.0.1:{server.port},127.0.0.1:{replica.port}"
        served_before_client = server.metrics.count(MODEL_NAME, "OK")  # other tests' calls
        with TranslatorClient(target, MODEL_NAME) as client:
            # round_robin picks among the subchannels that are READY: until the slower one has
            # connected, calls all go to the other. Call until both have answered once (each
            # call gives the slower connection time), then count.
            for _ in range(50):
                assert client.translate(["a b"]) == ["b a"]
                before = server.metrics.count(MODEL_NAME, "OK")
                replica_before = replica.metrics.count(MODEL_NAME, "OK")
                if replica_before and before > served_before_client:
                    break
            assert replica_before and before > served_before_client, (
                "one of the two addresses never answered in 50 calls"
            )
            for _ in range(6):
                assert client.translate(["a b"]) == ["b a"]
        assert server.metrics.count(MODEL_NAME, "OK") - before == 3
        assert replica.metrics.count(MODEL_NAME, "OK") - replica_before == 3
