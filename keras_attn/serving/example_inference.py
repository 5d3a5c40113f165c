"""Classify and Regress on tf.Example inputs: checking the signature, reading the examples,
writing the results.

A classification signature takes serialized tf.Examples as `inputs` and returns `classes`
(DT_STRING, `[batch, num_classes]`) and/or `scores` (DT_FLOAT, same shape); a regression
signature takes `inputs` and returns `outputs` (DT_FLOAT, `[batch]` or `[batch, 1]`). The
checks and messages follow tensorflow/serving `servables/tensorflow/classifier.cc`,
`regressor.cc` and `util.cc` (`InputToSerializedExampleTensor`); `ServingCore` runs the model in
between.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from google.protobuf import text_format
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import classification_pb2, input_pb2, regression_pb2

from keras_attn.serving.limits import RequestLimits
from keras_attn.serving.status import invalid_argument, resource_exhausted
from keras_attn.serving.tensors import dtype_from_numpy, dtype_name, format_shape

CLASSIFY_INPUTS = "inputs"
CLASSIFY_OUTPUT_CLASSES = "classes"
CLASSIFY_OUTPUT_SCORES = "scores"
REGRESS_INPUTS = "inputs"
REGRESS_OUTPUTS = "outputs"


def _debug_string(message: Any) -> str:
    return text_format.MessageToString(message)


def classification_aliases(signature: meta_graph_pb2.SignatureDef) -> tuple[str, list[str]]:
    """Checks a signature can classify; returns its input alias and class/score outputs."""
    if len(signature.inputs) != 1:
        raise invalid_argument("Expected one input Tensor.")
    if len(signature.outputs) not in (1, 2):
        raise invalid_argument(
            f"Expected one or two output Tensors, found {len(signature.outputs)}"
        )
    if CLASSIFY_INPUTS not in signature.inputs:
        raise invalid_argument(
            f"No classification inputs found in SignatureDef: {_debug_string(signature)}"
        )
    outputs = [
        alias
        for alias in (CLASSIFY_OUTPUT_CLASSES, CLASSIFY_OUTPUT_SCORES)
        if alias in signature.outputs
    ]
    if not outputs:
        raise invalid_argument(
            "Expected classification signature outputs to contain at least one of "
            f'"{CLASSIFY_OUTPUT_CLASSES}" or "{CLASSIFY_OUTPUT_SCORES}". '
            f"Signature was: {_debug_string(signature)}"
        )
    return CLASSIFY_INPUTS, outputs


def regression_aliases(signature: meta_graph_pb2.SignatureDef) -> tuple[str, str]:
    """Checks a signature can regress; returns its input and output aliases."""
    if len(signature.inputs) != 1:
        raise invalid_argument("Expected one input Tensor.")
    if len(signature.outputs) != 1:
        raise invalid_argument("Expected one output Tensor.")
    if REGRESS_INPUTS not in signature.inputs:
        raise invalid_argument(
            f"No regression inputs found in SignatureDef: {_debug_string(signature)}"
        )
    if REGRESS_OUTPUTS not in signature.outputs:
        raise invalid_argument(
            f"No regression outputs found in SignatureDef: {_debug_string(signature)}"
        )
    return REGRESS_INPUTS, REGRESS_OUTPUTS


def serialized_examples(model_input: input_pb2.Input, limits: RequestLimits | None) -> list[bytes]:
    """The serialized tf.Examples of an Input (context bytes prepended to each example).

    With `limits`, at most `max_rows_per_request` examples, and the copies of the context beyond
    the one the request carries count against `max_fill_bytes`.
    """
    kind = model_input.WhichOneof("kind")
    if limits is not None and kind is not None:
        limits.check_rows("Input", len(getattr(model_input, kind).examples))
    if kind == "example_list":
        examples = [e.SerializeToString() for e in model_input.example_list.examples]
    elif kind == "example_list_with_context":
        with_context = model_input.example_list_with_context
        context = with_context.context.SerializeToString()
        copies = max(len(with_context.examples) - 1, 0) * len(context)
        if limits is not None and copies > limits.max_fill_bytes:
            raise resource_exhausted(
                f"Input has {len(with_context.examples)} examples sharing a context of "
                f"{len(context)} bytes; prepending it to each would take {copies} more bytes "
                f"than the request, more than the server's limit of {limits.max_fill_bytes} "
                "(--max_fill_bytes)"
            )
        examples = [context + e.SerializeToString() for e in with_context.examples]
    else:
        examples = []
    if not examples:
        raise invalid_argument("Input is empty.")
    return examples


def fill_classification_result(
    outputs: Mapping[str, np.ndarray],
    num_examples: int,
    result: classification_pb2.ClassificationResult,
) -> None:
    """Writes one `Classifications` per example from the `classes` and/or `scores` outputs.

    Raises:
        ServingStatus: INVALID_ARGUMENT for outputs that are not `[batch, num_classes]` of the
            right dtype, a batch other than `num_examples`, or classes and scores of different
            widths.
    """
    classes = outputs.get(CLASSIFY_OUTPUT_CLASSES)
    scores = outputs.get(CLASSIFY_OUTPUT_SCORES)
    _check_class_tensor("classes", classes, types_pb2.DT_STRING, num_examples)
    _check_class_tensor("scores", scores, types_pb2.DT_FLOAT, num_examples)
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise invalid_argument(
            "Tensors class and score should match in dim_size(1). "
            f"Got {classes.shape[1]} vs. {scores.shape[1]}"
        )
    num_classes = (classes if classes is not None else scores).shape[1]
    for i in range(num_examples):
        classifications = result.classifications.add()
        for c in range(num_classes):
            entry = classifications.classes.add()
            if classes is not None:
                entry.label = bytes(classes[i, c]).decode("utf-8", errors="replace")
            if scores is not None:
                entry.score = float(scores[i, c])


def _check_class_tensor(label: str, tensor: np.ndarray | None, dtype: int, batch: int) -> None:
    if tensor is None:
        return
    if tensor.ndim != 2:
        raise invalid_argument(
            f"Expected Tensor shape: [batch_size num_classes] but got {format_shape(tensor.shape)}"
        )
    actual = dtype_from_numpy(tensor.dtype)
    if actual != dtype:
        raise invalid_argument(
            f"Expected {label} Tensor of {dtype_name(dtype)}. Got: {dtype_name(actual)}"
        )
    if tensor.shape[0] != batch:
        raise invalid_argument(
            f"Expected {label} output batch size of {batch}. Got: {tensor.shape[0]}"
        )


def fill_regression_result(
    tensor: np.ndarray, num_examples: int, result: regression_pb2.RegressionResult
) -> None:
    """Writes one `Regression` per example from the `outputs` tensor.

    Raises:
        ServingStatus: INVALID_ARGUMENT for a tensor that is not DT_FLOAT `[batch]` or
            `[batch, 1]`, or a batch other than `num_examples`.
    """
    if not (tensor.ndim == 1 or (tensor.ndim == 2 and tensor.shape[1] == 1)):
        raise invalid_argument(
            "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got "
            f"{format_shape(tensor.shape)}"
        )
    if tensor.shape[0] != num_examples:
        raise invalid_argument(
            "Input batch size did not match output batch size: "
            f"{num_examples} vs. {tensor.shape[0]}"
        )
    actual = dtype_from_numpy(tensor.dtype)
    if actual != types_pb2.DT_FLOAT:
        raise invalid_argument(f"Expected output Tensor of DT_FLOAT.  Got: {dtype_name(actual)}")
    for value in tensor.reshape(-1):
        result.regressions.add(value=float(value))
