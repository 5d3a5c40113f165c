"""Checks that an exported translator is what stock TensorFlow Serving can load and answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Signature name → (inputs, outputs), each name → (dtype enum name, shape with -1 for unknown).
STRING, FLOAT = "DT_STRING", "DT_FLOAT"
TRANSLATE_OUTPUTS = {
    "translation": (STRING, [-1]),
    "tokens": (STRING, [-1, -1]),
    "scores": (FLOAT, [-1]),
}
TRANSLATOR_SIGNATURES = {
    "serving_default": ({"text": (STRING, [-1])}, TRANSLATE_OUTPUTS),
    "translate": ({"text": (STRING, [-1])}, TRANSLATE_OUTPUTS),
    "translate_with_alignment": (
        {"text": (STRING, [-1])},
        {
            **TRANSLATE_OUTPUTS,
            "alignment": (FLOAT, [-1, -1, -1]),
            "source_tokens": (STRING, [-1, -1]),
        },
    ),
}
PREDICT_METHOD = "tensorflow/serving/predict"
FORBIDDEN_OP_PREFIXES = ("Cudnn", "PyFunc", "EagerPyFunc")


class ContractError(Exception):
    """The SavedModel breaks the serving contract; the message lists every violation."""


# Runs in a fresh interpreter that imports only tensorflow and tensorflow_text: the same
# situation as a model server. Prints one JSON report on stdout.
_PROBE = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tf-text ops, as the stock server does)
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

path, sentences = sys.argv[1], json.loads(sys.argv[2])
proto = saved_model_pb2.SavedModel()
with open(path + "/saved_model.pb", "rb") as f:
    proto.ParseFromString(f.read())
ops = set()
signatures = {}
for meta in proto.meta_graphs:
    graph = meta.graph_def
    ops.update(node.op for node in graph.node)
    for function in graph.library.function:
        ops.update(node.op for node in function.node_def)
    for key, sig in meta.signature_def.items():
        def describe(tensors):
            return {name: [t.dtype, [d.size for d in t.tensor_shape.dim]]
                    for name, t in tensors.items()}
        signatures[key] = {"method": sig.method_name, "inputs": describe(sig.inputs),
                           "outputs": describe(sig.outputs)}
unknown = sorted(op for op in ops if op_def_registry.get(op) is None)
loaded = tf.saved_model.load(path)
translations, errors = {}, {}
for key in loaded.signatures:
    try:
        outputs = loaded.signatures[key](text=tf.constant(sentences, tf.string))
    except Exception as error:  # reported, with the static findings, by the parent
        errors[key] = (str(error).strip().splitlines() or [type(error).__name__])[0]
        continue
    translations[key] = {name: value.shape.as_list() for name, value in outputs.items()}
    if "translation" in outputs:
        translations[key]["_text"] = [t.decode("utf-8") for t in outputs["translation"].numpy()]
leaked = sorted(m for m in sys.modules if m.split(".")[0] == "keras_attn")
print(json.dumps({"ops": sorted(ops), "unknown_ops": unknown, "signatures": signatures,
                  "outputs": translations, "errors": errors, "leaked_modules": leaked}))
"""


def _dtype_enum(name: str) -> int:
    from tensorflow.core.framework import types_pb2

    return types_pb2.DataType.Value(name)


def probe_saved_model(path: str | os.PathLike, sentences: list[str]) -> dict:
    """Load `path` in a fresh process with only tensorflow + tensorflow_text; return its report."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE, str(Path(path).resolve()), json.dumps(sentences)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if completed.returncode != 0:
        tail = completed.stderr.strip().splitlines()[-1:] or ["(no error output)"]
        raise ContractError(
            f"{path} does not load and run with only tensorflow + tensorflow_text: {tail[0]}"
        )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def check_translator_saved_model(
    path: str | os.PathLike, sentences: list[str] | None = None
) -> dict:
    """Verify the translator contract of DESIGN.md on an exported SavedModel.

    Checks, all in a fresh process importing only `tensorflow` and `tensorflow_text`: every op in
    the graph (functions included) is registered by TensorFlow core or tf-text and none is a
    Cudnn*/PyFunc op; the three signatures exist with method `tensorflow/serving/predict` and
    the exact input/output names, dtypes and ranks; each signature runs on `sentences` (an empty
    string included) and returns batch-major outputs; nothing of keras_attn is imported.

    Returns:
        The probe's report (ops, signatures, output shapes, translations).

    Raises:
        ContractError: listing every violation.
    """
    sentences = list(sentences or ["hola", ""])
    report = probe_saved_model(path, sentences)
    problems = []
    forbidden = [op for op in report["ops"] if op.startswith(FORBIDDEN_OP_PREFIXES)]
    if forbidden:
        problems.append(f"forbidden ops in the graph: {forbidden}")
    if report["unknown_ops"]:
        problems.append(f"ops unknown to tensorflow + tensorflow_text: {report['unknown_ops']}")
    for key, error in report["errors"].items():
        problems.append(f"{key} fails to run: {error}")
    if report["leaked_modules"]:
        problems.append(f"loading imported {report['leaked_modules']}")
    for key, (inputs, outputs) in TRANSLATOR_SIGNATURES.items():
        signature = report["signatures"].get(key)
        if signature is None:
            problems.append(f"missing signature {key!r}")
            continue
        if signature["method"] != PREDICT_METHOD:
            problems.append(f"{key}: method {signature['method']!r}, expected {PREDICT_METHOD!r}")
        for kind, expected, found in (
            ("input", inputs, signature["inputs"]),
            ("output", outputs, signature["outputs"]),
        ):
            if set(found) != set(expected):
                problems.append(f"{key}: {kind}s {sorted(found)}, expected {sorted(expected)}")
                continue
            for name, (dtype, shape) in expected.items():
                if found[name] != [_dtype_enum(dtype), shape]:
                    problems.append(
                        f"{key}: {kind} {name!r} is {found[name]}, expected {dtype} {shape}"
                    )
        for name, shape in report["outputs"].get(key, {}).items():
            if not name.startswith("_") and shape[:1] != [len(sentences)]:
                problems.append(f"{key}: output {name!r} is not batch-major: shape {shape}")
    if problems:
        raise ContractError(f"{path}: " + "; ".join(problems))
    return report
