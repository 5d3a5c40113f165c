"""The REST JSON codec on its own: request bodies into TensorProtos and tf.Examples, responses
into bodies, with the stock server's messages (no server, no model)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import classification_pb2, predict_pb2, regression_pb2

from keras_attn.serving.rest_json import (
    COLUMNAR_FORMAT,
    ROW_FORMAT,
    classification_result_to_json,
    fill_examples_request_from_json,
    fill_predict_request_from_json,
    predict_response_to_json,
    regression_result_to_json,
)
from keras_attn.serving.status import ServingStatus

INFOS = {
    "text": meta_graph_pb2.TensorInfo(name="text:0", dtype=types_pb2.DT_STRING),
    "scale": meta_graph_pb2.TensorInfo(name="scale:0", dtype=types_pb2.DT_FLOAT),
}


def parse(doc, infos=INFOS, max_depth=64):
    request = predict_pb2.PredictRequest()
    body = json.dumps(doc).encode() if not isinstance(doc, bytes) else doc
    format_ = fill_predict_request_from_json(body, lambda _: infos, request, max_depth)
    arrays = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
    return format_, arrays, request


def test_row_and_columnar_bodies_give_the_same_tensors():
    row = {
        "instances": [
            {"text": "a b", "scale": [1.5, 2]},
            {"text": {"b64": "AP8="}, "scale": [0, -1]},
        ]
    }
    columnar = {"inputs": {"text": ["a b", {"b64": "AP8="}], "scale": [[1.5, 2], [0, -1]]}}
    for doc, expected_format in ((row, ROW_FORMAT), (columnar, COLUMNAR_FORMAT)):
        format_, arrays, _ = parse(doc)
        assert format_ == expected_format
        assert arrays["text"].tolist() == [b"a b", b"\x00\xff"]
        np.testing.assert_array_equal(arrays["scale"], np.array([[1.5, 2], [0, -1]], np.float32))
        assert arrays["scale"].dtype == np.float32


def test_signature_name_and_a_single_input_as_a_plain_list():
    infos = {"text": INFOS["text"]}
    format_, arrays, request = parse(
        {"signature_name": "translate", "instances": ["x", "y"]}, infos
    )
    assert (format_, request.model_spec.signature_name) == (ROW_FORMAT, "translate")
    assert arrays["text"].tolist() == [b"x", b"y"]


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"instances": [{"text": "a", "scale": 2**25}]}, "to float without loss of precision"),
        ({"instances": [{"text": 1, "scale": 1.0}]}, "is not of expected type: string"),
        ({"instances": [{"text": "a"}]}, "keys must be equal to: scale,text"),
        ({"inputs": {"text": ["a"]}}, "Missing named input: scale in 'inputs' object."),
        ({"inputs": {"text": [{"b64": "%%"}], "scale": [1.0]}}, "Unable to base64 decode"),
        ({"instances": []}, "No values in 'instances' array"),
        ({"instances": [], "inputs": []}, "expecting only one of 'inputs' or 'instances'"),
        ({}, "Missing 'inputs' or 'instances' key"),
        (b"[1]", "Is not object"),
        (b"", "The document is empty"),
        (b'{"instances": [[[[1]]]]}', "nested more than 4 levels deep"),
    ],
)
def test_malformed_bodies_get_the_stock_message(doc, message):
    with pytest.raises(ServingStatus, match=message.replace("(", r"\(")) as failure:
        parse(doc, max_depth=4)
    assert failure.value.code.name == "INVALID_ARGUMENT"


def test_predict_responses_in_the_request_format():
    response = predict_pb2.PredictResponse()
    response.outputs["translation"].CopyFrom(tf.make_tensor_proto([b"b a", b"d c"]))
    response.outputs["scores"].CopyFrom(tf.make_tensor_proto(np.float32([0.1, 2.0])))
    response.outputs["raw_bytes"].CopyFrom(tf.make_tensor_proto([b"\xff", b"x"]))
    assert predict_response_to_json(response, ROW_FORMAT) == {
        "predictions": [
            {"raw_bytes": {"b64": "/w=="}, "scores": 0.1, "translation": "b a"},
            {"raw_bytes": {"b64": "eA=="}, "scores": 2.0, "translation": "d c"},
        ]
    }
    del response.outputs["raw_bytes"]
    assert predict_response_to_json(response, COLUMNAR_FORMAT) == {
        "outputs": {"scores": [0.1, 2.0], "translation": ["b a", "d c"]}
    }


def test_classify_and_regress_bodies():
    request = classification_pb2.ClassificationRequest()
    body = b'{"context": {"lang": "de"}, "examples": [{"x": [1, 2], "w": 0.5}, {"x": 3}]}'
    fill_examples_request_from_json(body, request)
    with_context = request.input.example_list_with_context
    assert with_context.context.features.feature["lang"].bytes_list.value == [b"de"]
    first = with_context.examples[0].features.feature
    assert first["x"].int64_list.value == [1, 2] and first["w"].float_list.value == [0.5]

    result = classification_pb2.ClassificationResult()
    result.classifications.add().classes.add(label="a", score=0.1)
    assert classification_result_to_json(result) == {"results": [[["a", 0.1]]]}
    regression = regression_pb2.RegressionResult()
    regression.regressions.add(value=0.3)
    assert regression_result_to_json(regression) == {"results": [0.3]}
    with pytest.raises(ServingStatus, match="Cannot convert empty RegressionResults to JSON"):
        regression_result_to_json(regression_pb2.RegressionResult())
