"""The request logic of a TensorFlow-Serving-compatible server, independent of the transport.

`ServingCore` answers the messages of `tensorflow_serving.apis` (Predict, GetModelMetadata,
GetModelStatus, Classify, Regress, MultiInference) from loaded `Servable`s and fails with
`ServingStatus` carrying the code and message stock TensorFlow Serving uses, checked in the same
order. Sources followed (tensorflow/serving): `model_servers/server_core.cc`
(`ServableRequestFromModelSpec`, version labels), `core/manager.h` (`Latest(..)`/`Specific(..)`),
`servables/tensorflow/predict_impl.cc` and `predict_util.cc`, TensorFlow's
`cc/saved_model/util.cc::GetInputValues`, `servables/tensorflow/util.cc` (`MakeModelSpec`),
`get_model_metadata_impl.cc`, `model_servers/get_model_status_impl.cc` and `multi_inference.cc`;
the tf.Example side of Classify / Regress lives in `keras_attn.serving.example_inference`.

The inputs are checked beyond what the stock server checks (it builds every tensor, then hands
them to `Session::Run`), and before any tensor is built: an input whose dtype differs from the
signature gets the message `Session::Run` would give ("Expects arg[i] to be string but float is
provided"), one whose rank or fixed dims do not fit the signature INVALID_ARGUMENT, and one over
the `RequestLimits` caps (rows, string bytes, filling) RESOURCE_EXHAUSTED; so what a request
costs stays proportional to its size.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import grpc
import numpy as np
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_pb2,
    predict_pb2,
    regression_pb2,
)

from keras_attn.serving import example_inference
from keras_attn.serving.deadline import check_deadline
from keras_attn.serving.example_inference import (
    classification_aliases,
    fill_classification_result,
    fill_regression_result,
    regression_aliases,
    serialized_examples,
)
from keras_attn.serving.limits import RequestLimits
from keras_attn.serving.servable import Servable
from keras_attn.serving.status import (
    ServingStatus,
    code_from_number,
    failed_precondition,
    internal,
    invalid_argument,
    not_found,
    unimplemented,
)
from keras_attn.serving.tensors import (
    as_ndarray,
    dtype_string,
    format_shape,
    ndarray_to_tensor_proto,
    shape_dims,
    shape_is_compatible,
    tensor_proto_layout,
    tensor_proto_to_ndarray,
)

DEFAULT_SIGNATURE = "serving_default"
UNKNOWN_LABEL = "<unknown>"  # the metric label of names the server does not serve
PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
SIGNATURE_DEF_FIELD = "signature_def"
# The Classify / Regress signature keys, defined beside the tf.Example handling.
CLASSIFY_INPUTS = example_inference.CLASSIFY_INPUTS
CLASSIFY_OUTPUT_CLASSES = example_inference.CLASSIFY_OUTPUT_CLASSES
CLASSIFY_OUTPUT_SCORES = example_inference.CLASSIFY_OUTPUT_SCORES
REGRESS_INPUTS = example_inference.REGRESS_INPUTS
REGRESS_OUTPUTS = example_inference.REGRESS_OUTPUTS


@dataclasses.dataclass(frozen=True)
class _Feed:
    """One input of a signature call: the alias, its TensorInfo, the sent dtype and the values."""

    alias: str
    info: meta_graph_pb2.TensorInfo
    dtype: int
    array: np.ndarray


@dataclasses.dataclass(frozen=True)
class VersionStatus:
    """The state of one model version, as `GetModelStatus` reports it.

    Attributes:
        version: the version number.
        state: a `ModelVersionStatus.State` (START, LOADING, AVAILABLE, UNLOADING, END).
        error_code: the status of the last transition (a failed load ends in END with its error).
        error_message: its message ("" when OK).
    """

    version: int
    state: int
    error_code: grpc.StatusCode = grpc.StatusCode.OK
    error_message: str = ""


class ServableSource(Protocol):
    """Where `ServingCore` finds servables: a `ModelManager`, or `StaticSource` in tests."""

    def servable(self, model_spec: model_pb2.ModelSpec) -> Servable:
        """The servable a ModelSpec asks for; raises the stock lookup errors."""

    def version_states(self, name: str) -> list[VersionStatus]:
        """Every version of a model the server has seen, highest first."""

    def signature_keys(self, name: str) -> set[str] | None:
        """The signature keys of a model's available versions; None for a model not served."""


def find_servable(
    versions: Mapping[int, Servable],
    labels: Mapping[str, int],
    model_spec: model_pb2.ModelSpec,
) -> Servable:
    """Resolves a ModelSpec against the available versions of its model, as stock does.

    `ServerCore::ServableRequestFromModelSpec` turns the spec into `Latest(name)` or
    `Specific(name, version)` (a label resolves to its version first), and the manager answers
    NOT_FOUND when no available version matches.
    """
    name = model_spec.name
    if not name:
        raise invalid_argument("ModelSpec has no name specified.")
    choice = model_spec.WhichOneof("version_choice")
    version: int | None = None
    if choice == "version":
        version = model_spec.version.value
    elif choice == "version_label":
        version = labels.get(model_spec.version_label)
        if version is None:
            raise invalid_argument(
                f"Unrecognized servable version label: {model_spec.version_label}"
            )
    if version is None:
        if not versions:
            raise not_found(f"Servable not found for request: Latest({name})")
        return versions[max(versions)]
    if version not in versions:
        raise not_found(f"Servable not found for request: Specific({name}, {version})")
    return versions[version]


class StaticSource:
    """A fixed set of loaded servables (every one AVAILABLE), with optional version labels."""

    def __init__(
        self,
        servables: Iterable[Servable],
        version_labels: Mapping[str, Mapping[str, int]] | None = None,
    ):
        self._servables: dict[str, dict[int, Servable]] = {}
        for servable in servables:
            self._servables.setdefault(servable.name, {})[servable.version] = servable
        self._labels = {name: dict(labels) for name, labels in (version_labels or {}).items()}

    def servable(self, model_spec: model_pb2.ModelSpec) -> Servable:
        name = model_spec.name
        return find_servable(self._servables.get(name, {}), self._labels.get(name, {}), model_spec)

    def version_states(self, name: str) -> list[VersionStatus]:
        return [
            VersionStatus(version, get_model_status_pb2.ModelVersionStatus.AVAILABLE)
            for version in sorted(self._servables.get(name, {}), reverse=True)
        ]

    def signature_keys(self, name: str) -> set[str] | None:
        if name not in self._servables:
            return None
        return {key for s in self._servables[name].values() for key in s.signature_defs}


class ServingCore:
    """Answers TensorFlow Serving API requests from a source of loaded servables.

    Args:
        source: where servables are looked up (a `ModelManager`, or a `StaticSource`).
        enable_signature_method_name_check: the stock flag of that name (default off, as in
            stock): when on, Classify/Regress/Predict require the matching `method_name`.
        limits: the caps on each request's inputs (`RequestLimits()` by default; None: none,
            for trusted requests such as a model's own warm-up records).
    """

    def __init__(
        self,
        source: ServableSource,
        enable_signature_method_name_check: bool = False,
        limits: RequestLimits | None = RequestLimits(),  # noqa: B008  (frozen, immutable)
    ):
        self.source = source
        self._method_check = enable_signature_method_name_check
        self.limits = limits

    def metric_labels(self, model_name: str, signature_name: str) -> tuple[str, str]:
        """The metric labels of a request: its model and signature names where they exist.

        A model name the server does not serve, or a signature no available version of it has,
        is counted as `UNKNOWN_LABEL`, so the metrics of a server stay bounded whatever names
        clients send.
        """
        keys = self.source.signature_keys(model_name)
        if keys is None:
            return UNKNOWN_LABEL, UNKNOWN_LABEL
        return model_name, signature_name if signature_name in keys else UNKNOWN_LABEL

    def servable(self, model_spec: model_pb2.ModelSpec) -> Servable:
        """The servable a ModelSpec asks for (latest version unless a version or label is set)."""
        return self.source.servable(model_spec)

    # ------------------------------------------------------------------ Predict

    def predict(self, request: predict_pb2.PredictRequest) -> predict_pb2.PredictResponse:
        """Runs a signature on the request's input tensors (`PredictionService.Predict`)."""
        servable = self.servable(_model_spec(request))
        signature_name = request.model_spec.signature_name or DEFAULT_SIGNATURE
        signature = servable.signature_defs.get(signature_name)
        if signature is None or servable.functions.get(signature_name) is None:
            raise failed_precondition(f'Serving signature key "{signature_name}" not found.')

        response = predict_pb2.PredictResponse()
        _make_model_spec(
            response.model_spec, request.model_spec.name, signature_name, servable.version
        )
        if self._method_check and signature.method_name not in (
            PREDICT_METHOD,
            CLASSIFY_METHOD,
            REGRESS_METHOD,
        ):
            raise internal(
                "Expected prediction signature method_name to be one of "
                f"{{{PREDICT_METHOD}, {CLASSIFY_METHOD}, {REGRESS_METHOD}}}. "
                f"Was: {signature.method_name}"
            )
        _verify_request_inputs_size(signature, request)
        feeds = _input_values(signature_name, signature, request.inputs, self.limits)
        aliases = _output_aliases(signature, request.output_filter)
        outputs = _run(servable, signature_name, feeds)
        for alias in aliases:
            info = signature.outputs[alias]
            dtype = info.dtype if info.dtype != types_pb2.DT_INVALID else None
            response.outputs[alias].CopyFrom(ndarray_to_tensor_proto(outputs[alias], dtype))
        return response

    # ------------------------------------------------------------------ metadata and status

    def get_model_metadata(
        self, request: get_model_metadata_pb2.GetModelMetadataRequest
    ) -> get_model_metadata_pb2.GetModelMetadataResponse:
        """The SignatureDefMap of a servable, packed in an Any (`GetModelMetadata`)."""
        model_spec = _model_spec(request)
        if not request.metadata_field:
            raise invalid_argument(
                "GetModelMetadataRequest must specify at least one metadata_field"
            )
        for field in request.metadata_field:
            if field != SIGNATURE_DEF_FIELD:
                # The stock server passes a printf pattern to a concatenating helper, so its
                # message reads literally "Metadata field %s is not supported<field>".
                raise invalid_argument(f"Metadata field %s is not supported{field}")
        servable = self.servable(model_spec)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        signature_def_map = get_model_metadata_pb2.SignatureDefMap()
        for key, signature in servable.signature_defs.items():
            signature_def_map.signature_def[key].CopyFrom(signature)
        response.metadata[SIGNATURE_DEF_FIELD].Pack(signature_def_map)
        return response

    def get_model_status(
        self, request: get_model_status_pb2.GetModelStatusRequest
    ) -> get_model_status_pb2.GetModelStatusResponse:
        """The state of one version, or of every known version, of a model (`GetModelStatus`)."""
        name = _model_spec(request).name
        states = self.source.version_states(name)
        # The stock state monitor's VersionMap is ordered by version, highest first.
        if request.model_spec.HasField("version"):
            version = request.model_spec.version.value
            states = [state for state in states if state.version == version]
            if not states:
                raise not_found(f"Could not find version {version} of model {name}")
        elif not states:
            raise not_found(f"Could not find any versions of model {name}")
        response = get_model_status_pb2.GetModelStatusResponse()
        for state in states:
            status = response.model_version_status.add(version=state.version, state=state.state)
            status.status.SetInParent()
            status.status.error_code = state.error_code.value[0]
            status.status.error_message = state.error_message
        return response

    # ------------------------------------------------------------------ Classify / Regress

    def classify(
        self, request: classification_pb2.ClassificationRequest
    ) -> classification_pb2.ClassificationResponse:
        """Runs a classification signature on tf.Example inputs (`PredictionService.Classify`)."""
        return self._run_examples(
            request, _EXAMPLE_METHODS[CLASSIFY_METHOD], classification_pb2.ClassificationResponse()
        )

    def regress(
        self, request: regression_pb2.RegressionRequest
    ) -> regression_pb2.RegressionResponse:
        """Runs a regression signature on tf.Example inputs (`PredictionService.Regress`)."""
        return self._run_examples(
            request, _EXAMPLE_METHODS[REGRESS_METHOD], regression_pb2.RegressionResponse()
        )

    def _check_method(self, signature: meta_graph_pb2.SignatureDef, method: _ExampleMethod):
        """An INVALID_ARGUMENT error for a signature of another method, when the server checks
        method names."""
        if self._method_check and signature.method_name != method.name:
            raise invalid_argument(
                f"Expected {method.kind} signature method_name to be {method.name}. "
                f"Was: {signature.method_name}"
            )

    def _run_examples(self, request, method: _ExampleMethod, response):
        """Runs the Classify/Regress signature `request` names on its tf.Examples and fills
        `response` (its `model_spec` and `result`)."""
        servable = self.servable(_model_spec(request))
        signature_name, signature = _find_signature(servable, request.model_spec)
        self._check_method(signature, method)
        input_alias, output_aliases = method.aliases(signature)
        _make_model_spec(
            response.model_spec, request.model_spec.name, signature_name, servable.version
        )
        examples = serialized_examples(request.input, self.limits)
        outputs = _run_on_examples(servable, signature_name, signature, input_alias, examples)
        method.fill(outputs, output_aliases, len(examples), response.result)
        return response

    def multi_inference(
        self, request: inference_pb2.MultiInferenceRequest
    ) -> inference_pb2.MultiInferenceResponse:
        """Several classify/regress tasks of one model on one input (`MultiInference`)."""
        first_spec = (
            request.tasks[0].model_spec
            if request.tasks and request.tasks[0].HasField("model_spec")
            else model_pb2.ModelSpec()
        )
        servable = self.servable(first_spec)
        model_name = ""
        input_alias = ""
        seen: set[str] = set()
        plan: list[tuple[str, meta_graph_pb2.SignatureDef, str, list[str], _ExampleMethod]] = []
        for task in request.tasks:
            if not task.model_spec.name:
                raise invalid_argument("Found ModelSpec with an empty model name.")
            if not model_name:
                model_name = task.model_spec.name
            elif model_name != task.model_spec.name:
                raise invalid_argument(
                    "All ModelSpecs in a MultiInferenceRequest must access the same model name."
                )
            signature_name = task.model_spec.signature_name or DEFAULT_SIGNATURE
            if signature_name in seen:
                raise invalid_argument(f"Duplicate evaluation of signature: {signature_name}")
            seen.add(signature_name)
            signature = servable.signature_defs.get(signature_name)
            if signature is None:
                raise invalid_argument(
                    f"Requested signature not found in model graph: {signature_name}"
                )
            method = _EXAMPLE_METHODS.get(task.method_name)
            if method is None:
                raise unimplemented(f"Unsupported signature method_name: {task.method_name}")
            self._check_method(signature, method)
            alias, outputs = method.aliases(signature)
            name = signature.inputs[alias].name
            if not input_alias:
                input_alias = name
            elif input_alias != name:
                raise invalid_argument("Input tensor must be the same for all Signatures.")
            plan.append((signature_name, signature, alias, outputs, method))

        examples = serialized_examples(request.input, self.limits)
        response = inference_pb2.MultiInferenceResponse()
        for task, (signature_name, signature, alias, output_aliases, method) in zip(
            request.tasks, plan, strict=True
        ):
            outputs = _run_on_examples(servable, signature_name, signature, alias, examples)
            result = response.results.add()
            method.fill(
                outputs, output_aliases, len(examples), getattr(result, method.result_field)
            )
            _make_model_spec(
                result.model_spec,
                task.model_spec.name,
                task.model_spec.signature_name,
                servable.version,
            )
        return response


# ---------------------------------------------------------------------- helpers


@dataclasses.dataclass(frozen=True)
class _ExampleMethod:
    """How a Classify or Regress signature (alone or as a MultiInference task) is read and
    answered.

    `aliases(signature)` gives `(input alias, output aliases)`; `fill(outputs, output aliases,
    number of examples, result)` fills a `ClassificationResult` or `RegressionResult`, which
    a `MultiInferenceResponse` result holds as `result_field`.
    """

    name: str
    kind: str
    aliases: Callable[[meta_graph_pb2.SignatureDef], tuple[str, list[str]]]
    fill: Callable[[Mapping[str, Any], list[str], int, Any], None]
    result_field: str


def _fill_classification(outputs, output_aliases, num_examples, result) -> None:
    fill_classification_result(
        {alias: outputs[alias] for alias in output_aliases}, num_examples, result
    )


def _fill_regression(outputs, output_aliases, num_examples, result) -> None:
    fill_regression_result(outputs[output_aliases[0]], num_examples, result)


def _regression_aliases(signature: meta_graph_pb2.SignatureDef) -> tuple[str, list[str]]:
    input_alias, output_alias = regression_aliases(signature)
    return input_alias, [output_alias]


_EXAMPLE_METHODS = {
    CLASSIFY_METHOD: _ExampleMethod(
        CLASSIFY_METHOD,
        "classification",
        classification_aliases,
        _fill_classification,
        "classification_result",
    ),
    REGRESS_METHOD: _ExampleMethod(
        REGRESS_METHOD, "regression", _regression_aliases, _fill_regression, "regression_result"
    ),
}


def _model_spec(request) -> model_pb2.ModelSpec:
    """The ModelSpec of `request`; INVALID_ARGUMENT "Missing ModelSpec" when it has none."""
    if not request.HasField("model_spec"):
        raise invalid_argument("Missing ModelSpec")
    return request.model_spec


def _make_model_spec(
    spec: model_pb2.ModelSpec, name: str, signature_name: str, version: int
) -> None:
    """Fills a response ModelSpec as `util.cc::MakeModelSpec` does (empty -> serving_default)."""
    spec.Clear()
    spec.name = name
    spec.signature_name = signature_name or DEFAULT_SIGNATURE
    spec.version.value = version


def _joined(keys: Iterable[str]) -> str:
    return ",".join(sorted(keys))


def _verify_request_inputs_size(
    signature: meta_graph_pb2.SignatureDef, request: predict_pb2.PredictRequest
) -> None:
    sent = set(request.inputs)
    expected = set(signature.inputs)
    if len(sent) > len(expected) or (len(sent) < len(expected) and not signature.defaults):
        raise invalid_argument(
            f"input size does not match signature: {len(sent)}!={len(expected)} "
            f"len({{{_joined(sent)}}}) != len({{{_joined(expected)}}}). "
            f"Sent extra: {{{_joined(sent - expected)}}}. "
            f"Missing but required: {{{_joined(expected - sent)}}}."
        )


def _input_values(
    signature_name: str,
    signature: meta_graph_pb2.SignatureDef,
    inputs: Mapping[str, tensor_pb2.TensorProto],
    limits: RequestLimits | None,
) -> list[_Feed]:
    """The feeds for every signature input, from the request or the signature's defaults.

    Nothing is materialised before every input has passed, in this order: its layout is read
    (a proto `Tensor::FromProto` refuses: INVALID_ARGUMENT `tensor parsing error: ALIAS`),
    dtypes and shapes are checked against the signature, then the request's inputs against
    `limits`.
    """
    chosen: list[tuple[str, meta_graph_pb2.TensorInfo, tensor_pb2.TensorProto, bool]] = []
    used = set()
    for alias in sorted(signature.inputs):
        info = signature.inputs[alias]
        if alias in inputs:
            chosen.append((alias, info, inputs[alias], True))
            used.add(alias)
        elif alias in signature.defaults:
            chosen.append((alias, info, signature.defaults[alias], False))
        else:
            raise invalid_argument(
                f"Signature input alias: {alias}(feed name: {info.name}) not found in request "
                f"and no default value provided. Inputs expected to be in the request "
                f"{{{_joined(inputs)}}}, or default input alias set: "
                f"{_joined(signature.defaults)}"
            )
    if inputs and len(used) != len(inputs):
        raise invalid_argument(
            f"Inputs contains invalid name. Used request inputs: {_joined(used)}, "
            f"request input: {_joined(inputs)}"
        )
    layouts = {}
    for alias, _, proto, _ in chosen:
        try:
            layouts[alias] = tensor_proto_layout(proto)
        except ValueError:
            raise invalid_argument(f"tensor parsing error: {alias}") from None
    sent = [(alias, info, proto.dtype, layouts[alias].dims) for alias, info, proto, _ in chosen]
    _check_fit(signature_name, sent)
    if limits is not None:
        for alias, _, proto, from_request in chosen:
            if from_request:
                longest = max(map(len, proto.string_val), default=0)
                limits.check_tensor(alias, layouts[alias], longest)
    return [
        _Feed(alias, info, proto.dtype, tensor_proto_to_ndarray(proto))
        for alias, info, proto, _ in chosen
    ]


def _output_aliases(
    signature: meta_graph_pb2.SignatureDef, output_filter: Sequence[str]
) -> list[str]:
    """The outputs to return: `output_filter` in order (validated), else every output."""
    aliases: list[str] = []
    for alias in output_filter:
        if alias not in signature.outputs:
            raise invalid_argument(
                f"output tensor alias not found in signature: {alias} Outputs expected to be "
                f"in the set {{{_joined(signature.outputs)}}}."
            )
        if alias in aliases:
            raise invalid_argument(f"duplicate output tensor alias: {alias}")
        aliases.append(alias)
    return aliases or sorted(signature.outputs)


def _check_fit(
    signature_name: str,
    inputs: Sequence[tuple[str, meta_graph_pb2.TensorInfo, int, Sequence[int]]],
) -> None:
    """Refuses inputs (alias, TensorInfo, sent dtype, sent dims) the signature cannot take."""
    # Session::Run numbers its arguments by feed name, sorted.
    for index, (_, info, dtype, _) in enumerate(sorted(inputs, key=lambda i: i[1].name)):
        if dtype != info.dtype:
            raise invalid_argument(
                f"Expects arg[{index}] to be {dtype_string(info.dtype)} but "
                f"{dtype_string(dtype)} is provided"
            )
    for alias, info, _, dims in inputs:
        expected = shape_dims(info.tensor_shape)
        if not shape_is_compatible(dims, expected):
            raise invalid_argument(
                f"Input tensor alias: {alias} has shape {format_shape(dims)} "
                f"but signature {signature_name} expects shape {format_shape(expected)}"
            )


def _run(servable: Servable, signature_name: str, feeds: Sequence[_Feed]) -> dict[str, Any]:
    """Calls a signature function on checked feeds; returns its outputs as NumPy arrays."""
    import tensorflow as tf

    function = servable.functions.get(signature_name)
    if function is None:
        raise failed_precondition(f'Serving signature key "{signature_name}" not found.')
    check_deadline()
    try:
        outputs = function(**{feed.alias: feed.array for feed in feeds})
        return {alias: as_ndarray(tensor) for alias, tensor in outputs.items()}
    except tf.errors.OpError as error:
        raise ServingStatus(
            code_from_number(error.error_code), session_message(error.message)
        ) from None
    except UnicodeDecodeError as error:
        # An op error whose message quotes non-UTF-8 input bytes cannot become a Python
        # string (TensorFlow raises this instead of the OpError). Its raw text is kept on the
        # exception; the code is lost with it, and INVALID_ARGUMENT is what ops report for
        # unusable input values (e.g. StringToNumber).
        text = bytes(error.object).decode("utf-8", errors="backslashreplace")
        raise invalid_argument(session_message(text)) from None
    except (TypeError, ValueError) as error:
        raise invalid_argument(str(error)) from None


_OP_SUFFIX = re.compile(r" \[Op:[^\]]*\](?: name: .*)?$", re.DOTALL)


def session_message(message: str) -> str:
    """An eager TensorFlow error message as `Session::Run` words it in the stock server.

    Python's eager runtime wraps graph errors as `Graph execution error:\n\nDetected at node X
    defined at (most recent call last):\n<stack traces unavailable>\n<message>
    [Op:__inference_...]`, and `Session.run` as `Graph execution error:\n\nDetected at node 'X'
    defined at (most recent call last):\n[  <traceback>\n]Node: 'X'\n<message>` (one such header
    per node the message names); the model server's session returns just `<message>`.
    """
    lines = message.splitlines()
    if lines and lines[0] == "Graph execution error:":
        marker = "<stack traces unavailable>"
        if marker in lines:
            lines = lines[lines.index(marker) + 1 :]
        else:
            header = ("Detected at", "  ", "Node: ")
            start = 1
            while start < len(lines) and (not lines[start] or lines[start].startswith(header)):
                start += 1
            lines = lines[start:]
    return _OP_SUFFIX.sub("", "\n".join(lines))


def _find_signature(
    servable: Servable, model_spec: model_pb2.ModelSpec
) -> tuple[str, meta_graph_pb2.SignatureDef]:
    signature_name = model_spec.signature_name or DEFAULT_SIGNATURE
    signature = servable.signature_defs.get(signature_name)
    if signature is None:
        raise invalid_argument(f"No signature was found with the name: {signature_name}")
    return signature_name, signature


def _run_on_examples(
    servable: Servable,
    signature_name: str,
    signature: meta_graph_pb2.SignatureDef,
    input_alias: str,
    examples: Sequence[bytes],
) -> dict[str, Any]:
    array = np.empty(len(examples), dtype=object)
    array[:] = list(examples)
    info = signature.inputs[input_alias]
    _check_fit(signature_name, [(input_alias, info, types_pb2.DT_STRING, array.shape)])
    return _run(servable, signature_name, [_Feed(input_alias, info, types_pb2.DT_STRING, array)])
