"""Classify / Regress on tf.Example inputs, without a model: the signature checks, the serialized
examples (context prepended, caps) and the results written from output tensors."""

from __future__ import annotations

import numpy as np
import pytest
from tensorflow.core.example import example_pb2
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import classification_pb2, input_pb2, regression_pb2

from keras_attn.serving.example_inference import (
    classification_aliases,
    fill_classification_result,
    fill_regression_result,
    regression_aliases,
    serialized_examples,
)
from keras_attn.serving.limits import RequestLimits
from keras_attn.serving.status import ServingStatus


def example(**features: list[int]) -> example_pb2.Example:
    result = example_pb2.Example()
    for name, values in features.items():
        result.features.feature[name].int64_list.value.extend(values)
    return result


def signature(inputs: list[str], outputs: list[str]) -> meta_graph_pb2.SignatureDef:
    result = meta_graph_pb2.SignatureDef()
    for alias in inputs:
        result.inputs[alias].dtype = types_pb2.DT_STRING
    for alias in outputs:
        result.outputs[alias].dtype = types_pb2.DT_FLOAT
    return result


def test_signature_aliases():
    assert classification_aliases(signature(["inputs"], ["scores"])) == ("inputs", ["scores"])
    both = signature(["inputs"], ["scores", "classes"])
    assert classification_aliases(both) == ("inputs", ["classes", "scores"])
    assert regression_aliases(signature(["inputs"], ["outputs"])) == ("inputs", "outputs")
    with pytest.raises(ServingStatus, match="Expected one input Tensor."):
        regression_aliases(signature(["inputs", "more"], ["outputs"]))
    with pytest.raises(ServingStatus, match="No regression outputs found in SignatureDef"):
        regression_aliases(signature(["inputs"], ["scores"]))


def test_the_context_is_prepended_to_every_example():
    model_input = input_pb2.Input()
    with_context = model_input.example_list_with_context
    with_context.context.CopyFrom(example(c=[7]))
    with_context.examples.extend([example(x=[1]), example(x=[2])])
    serialized = serialized_examples(model_input, RequestLimits())
    # Concatenated serialized messages parse as their merge.
    assert [example_pb2.Example.FromString(s) for s in serialized] == [
        example(c=[7], x=[1]),
        example(c=[7], x=[2]),
    ]


def test_examples_are_capped():
    model_input = input_pb2.Input()
    model_input.example_list.examples.extend([example(x=[i]) for i in range(3)])
    with pytest.raises(ServingStatus, match="more than the server's limit of 2") as failure:
        serialized_examples(model_input, RequestLimits(max_rows_per_request=2))
    assert failure.value.code.name == "RESOURCE_EXHAUSTED"
    with pytest.raises(ServingStatus, match="Input is empty."):
        serialized_examples(input_pb2.Input(), None)


def test_results_from_output_tensors():
    result = classification_pb2.ClassificationResult()
    classes = np.array([[b"a", b"b"]], dtype=object)
    scores = np.float32([[0.25, 0.75]])
    fill_classification_result({"classes": classes, "scores": scores}, 1, result)
    assert [(c.label, c.score) for c in result.classifications[0].classes] == [
        ("a", 0.25),
        ("b", 0.75),
    ]
    with pytest.raises(ServingStatus, match="Expected scores output batch size of 2. Got: 1"):
        fill_classification_result({"scores": scores}, 2, result)

    regression = regression_pb2.RegressionResult()
    fill_regression_result(np.float32([[0.5], [1.5]]), 2, regression)
    assert [r.value for r in regression.regressions] == [0.5, 1.5]
    with pytest.raises(ServingStatus, match="Expected output Tensor of DT_FLOAT.  Got: DT_DOUBLE"):
        fill_regression_result(np.float64([0.5]), 1, regression)
