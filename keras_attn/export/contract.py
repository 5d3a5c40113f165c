"""Checks that an exported translator, generator, captioner, classifier, tagger or answerer is
what stock TF Serving loads and answers."""

from __future__ import annotations

import atexit
import base64
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# Signature name → (inputs, outputs), each name → (dtype enum name, shape with -1 for unknown).
STRING, FLOAT, INT32 = "DT_STRING", "DT_FLOAT", "DT_INT32"


def decoded_outputs(text_key: str) -> dict:
    """The outputs of a decoded signature (`keras_attn.export._decoded.string_outputs`):
    `text_key` `[-1]` string, `tokens` `[-1, -1]` string and `scores` `[-1]` float."""
    return {text_key: (STRING, [-1]), "tokens": (STRING, [-1, -1]), "scores": (FLOAT, [-1])}


TRANSLATE_OUTPUTS = decoded_outputs("translation")
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


def translator_signatures(with_alignment: bool = True) -> dict:
    """`TRANSLATOR_SIGNATURES`, without `translate_with_alignment` for a translator whose step
    view gives no alignments (`keras_attn.export.translator.Translator.with_alignment`)."""
    if with_alignment:
        return dict(TRANSLATOR_SIGNATURES)
    return {k: v for k, v in TRANSLATOR_SIGNATURES.items() if k != "translate_with_alignment"}


GENERATE_OUTPUTS = decoded_outputs("continuation")
GENERATOR_SIGNATURES = {
    "serving_default": ({"prompt": (STRING, [-1])}, GENERATE_OUTPUTS),
    "generate": ({"prompt": (STRING, [-1])}, GENERATE_OUTPUTS),
    "generate_with_options": (
        {
            "prompt": (STRING, [-1]),
            "max_length": (INT32, []),
            "temperature": (FLOAT, []),
            "top_k": (INT32, []),
            "top_p": (FLOAT, []),
        },
        GENERATE_OUTPUTS,
    ),
}


def captioner_signatures(grid_shape: tuple[int, int]) -> dict:
    """The captioner's signatures (`keras_attn.export.captioner.Captioner`) for an `H' x W'` grid
    of image regions: `image` (encoded PNG/JPEG bytes) → `caption`, `tokens`, `scores` and
    `attention` `[-1, T_out, H', W']`."""
    outputs = {
        **decoded_outputs("caption"),
        "attention": (FLOAT, [-1, -1, *(int(side) for side in grid_shape)]),
    }
    inputs = {"image": (STRING, [-1])}
    return {"serving_default": (inputs, outputs), "caption": (inputs, outputs)}


def answerer_signatures(num_answers: int, grid_shape: tuple[int, int]) -> dict:
    """The answerer's signatures (`keras_attn.export.answerer.Answerer`) for `num_answers`
    answers and an `H' x W'` grid of image regions: `image` (encoded PNG/JPEG bytes) and
    `question` → `answer`, `classes` and `scores` `[-1, num_answers]`, `attention`
    `[-1, H', W']`, `tokens` and `question_attention` `[-1, T]`."""
    inputs = {"image": (STRING, [-1]), "question": (STRING, [-1])}
    outputs = {
        "answer": (STRING, [-1]),
        "classes": (STRING, [-1, num_answers]),
        "scores": (FLOAT, [-1, num_answers]),
        "attention": (FLOAT, [-1, *(int(side) for side in grid_shape)]),
        "tokens": (STRING, [-1, -1]),
        "question_attention": (FLOAT, [-1, -1]),
    }
    return {"serving_default": (inputs, outputs), "answer": (inputs, outputs)}


PREDICT_METHOD = "tensorflow/serving/predict"
# Cudnn ops need a GPU; Python functions are not in the model server; the Xla* ops (e.g.
# XlaDynamicUpdateSlice, what `keras.ops.slice_update` becomes) compile with XLA when they run,
# which the stock server refuses on a CPU unless started with --xla_cpu_compilation_enabled.
FORBIDDEN_OP_PREFIXES = ("Cudnn", "PyFunc", "EagerPyFunc", "Xla")


class ContractError(Exception):
    """The SavedModel breaks the serving contract; the message lists every violation."""


# Runs in a child interpreter that imports only tensorflow and tensorflow_text: the same
# situation as a model server. It reads one request per line on stdin (JSON: the SavedModel's
# path and the feeds), answers each with one line on stdout (the marker given as its argument,
# then the JSON report) and serves requests until stdin closes. It runs each signature once, so
# Grappler's graph rewrites (about a third of the CPU of loading and running a translator) would
# only cost time: they change no op a server must have, no output name, dtype or shape, and a
# graph Grappler cannot rewrite runs unrewritten, in a server as here.
_PROBE = r"""
import base64, gc, json, re, sys, traceback
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tf-text ops, as the stock server does)
from tensorflow.core.protobuf import saved_model_pb2

tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})

ANSWER = sys.argv[1]

def constant(dtype, value):  # "base64": a list of binary strings (encoded images), base64 in JSON
    if dtype == "base64":
        return tf.constant([base64.b64decode(v) for v in value], tf.string)
    return tf.constant(value, getattr(tf, dtype))

def probe(path, feeds):
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
    unknown, loaded = [], None
    try:
        loaded = tf.saved_model.load(path)
    except Exception as error:  # an op this process does not register fails the load: name it
        unknown = sorted(set(re.findall(r"Op type not registered '([^']+)'", str(error))))
        if not unknown:
            raise
    translations, errors = {}, {}
    for key in loaded.signatures if loaded is not None else ():
        try:
            feed = feeds.get(key, feeds["*"])  # input name -> [tf dtype name, value]
            inputs = {name: constant(dtype, value) for name, (dtype, value) in feed.items()}
            outputs = loaded.signatures[key](**inputs)
        except Exception as error:  # reported, with the static findings, by the parent
            errors[key] = (str(error).strip().splitlines() or [type(error).__name__])[0]
            continue
        translations[key] = {name: value.shape.as_list() for name, value in outputs.items()}
        for text in ("translation", "continuation", "caption", "label", "tags", "answer"):
            if text in outputs:
                strings = outputs[text].numpy().reshape(-1)
                translations[key]["_text"] = [t.decode("utf-8") for t in strings]
        if "scores" in outputs and outputs["scores"].dtype == tf.float32:
            translations[key]["_scores"] = outputs["scores"].numpy().tolist()
    leaked = sorted(m for m in sys.modules if m.split(".")[0] == "keras_attn")
    return {"ops": sorted(ops), "unknown_ops": unknown, "signatures": signatures,
            "outputs": translations, "errors": errors, "leaked_modules": leaked}

for line in sys.stdin:
    request = json.loads(line)
    try:
        report = probe(request["path"], request["feeds"])
    except Exception as error:  # the last line a traceback would end with
        lines = "".join(traceback.format_exception_only(error)).strip().splitlines()
        report = {"fatal": lines[-1] if lines else type(error).__name__}
    gc.collect()
    sys.stdout.write(ANSWER + json.dumps(report) + "\n")
    sys.stdout.flush()
"""
# The answer lines of `_PROBE` start with this (anything else the child prints is ignored).
_ANSWER = "keras-attn-contract-report:"
# Checks one probe process answers before it is replaced by a fresh one (each keeps the
# SavedModels it loaded).
PROBES_PER_PROCESS = 20
PROBE_TIMEOUT_S = 600


class _ProbeProcess:
    """The child interpreter that runs `_PROBE`, started on first use and reused by the
    following checks of this process (one at a time), so each export does not pay for importing
    TensorFlow again; replaced after `PROBES_PER_PROCESS` checks, after a crash, or in a forked
    child."""

    _lock = threading.Lock()
    _current: _ProbeProcess | None = None

    def __init__(self) -> None:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        self.owner = os.getpid()
        self.used = 0
        self.pending = b""  # what the process wrote after the last line read
        self.stderr = tempfile.TemporaryFile(mode="w+b")
        self.process = subprocess.Popen(
            [sys.executable, "-c", _PROBE, _ANSWER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )

    @classmethod
    def run(cls, path: str, feeds: dict) -> dict:
        """The report of `_PROBE` on `path`; a ContractError when the process dies."""
        with cls._lock:
            current = cls._current
            if (
                current is None
                or current.owner != os.getpid()
                or current.used >= PROBES_PER_PROCESS
                or current.process.poll() is not None
            ):
                if current is not None and current.owner == os.getpid():
                    current.close()
                current = cls._current = cls()
            current.used += 1
            try:
                return current.ask(path, feeds)
            except BaseException:
                current.close()
                cls._current = None
                raise

    def ask(self, path: str, feeds: dict) -> dict:
        request = json.dumps({"path": path, "feeds": feeds}) + "\n"
        try:
            self.process.stdin.write(request.encode("utf-8"))
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died; reported below from its stderr
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        descriptor = self.process.stdout.fileno()
        while True:
            end = self.pending.find(b"\n")
            if end >= 0:
                line, self.pending = self.pending[: end + 1], self.pending[end + 1 :]
                text = line.decode("utf-8", "replace")
                if text.startswith(_ANSWER):
                    return json.loads(text[len(_ANSWER) :])
                continue
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([descriptor], [], [], max(remaining, 0))
            if not ready:
                raise ContractError(f"{path}: no answer within {PROBE_TIMEOUT_S} s")
            chunk = os.read(descriptor, 1 << 16)
            if not chunk:  # the process ended: its last words are on stderr
                self.process.wait()
                self.stderr.seek(0)
                tail = self.stderr.read().decode("utf-8", "replace").strip().splitlines()
                return {"fatal": tail[-1] if tail else "(no error output)"}
            self.pending += chunk

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        self.stderr.close()

    @classmethod
    def close_current(cls) -> None:
        with cls._lock:
            if cls._current is not None and cls._current.owner == os.getpid():
                cls._current.close()
            cls._current = None


atexit.register(_ProbeProcess.close_current)


def _dtype_enum(name: str) -> int:
    from tensorflow.core.framework import types_pb2

    return types_pb2.DataType.Value(name)


def probe_saved_model(
    path: str | os.PathLike, sentences: list[str], feeds: dict | None = None
) -> dict:
    """Load `path` in a separate process that imports only tensorflow + tensorflow_text (one
    kept for the following checks of this process); return its report.

    Every signature is called with `feeds[signature]` (or `feeds["*"]`), a dict of input name →
    `[tf dtype name, value]` (dtype `"base64"`: a list of base64 strings, fed as the binary
    strings they encode); by default `{"*": {"text": ["string", sentences]}}`.
    """
    feeds = feeds or {"*": {"text": ["string", list(sentences)]}}
    report = _ProbeProcess.run(str(Path(path).resolve()), feeds)
    if "fatal" in report:
        raise ContractError(
            f"{path} does not load and run with only tensorflow + tensorflow_text: "
            f"{report['fatal']}"
        )
    return report


def check_translator_saved_model(
    path: str | os.PathLike, sentences: list[str] | None = None, with_alignment: bool | None = True
) -> dict:
    """Verify the translator contract (docs/serving.md) on an exported SavedModel.

    Checks, all in a separate process importing only `tensorflow` and `tensorflow_text`: every op in
    the graph (functions included) is registered by TensorFlow core or tf-text and none is a
    Cudnn*/PyFunc op; the signatures exist with method `tensorflow/serving/predict` and the exact
    input/output names, dtypes and ranks; each signature runs on `sentences` (an empty string
    included) and returns batch-major outputs; nothing of keras_attn is imported.

    The signatures are `serving_default`, `translate` and `translate_with_alignment`, the last
    one left out for a translator without alignments (a step view whose state has no
    `"attention"`): `with_alignment=True` (the default) requires it, `False` refuses it, None
    accepts either.

    Returns:
        The probe's report (ops, signatures, output shapes, translations).

    Raises:
        ContractError: listing every violation.
    """
    sentences = list(sentences or ["hola", ""])
    report = probe_saved_model(path, sentences)
    if with_alignment is None:
        with_alignment = "translate_with_alignment" in report["signatures"]
    signatures = translator_signatures(with_alignment)
    problems = _violations(report, signatures, len(sentences))
    if not with_alignment and "translate_with_alignment" in report["signatures"]:
        problems.append("unexpected signature 'translate_with_alignment'")
    if problems:
        raise ContractError(f"{path}: " + "; ".join(problems))
    return report


def check_generator_saved_model(path: str | os.PathLike, prompts: list[str] | None = None) -> dict:
    """Verify the generator contract (`keras_attn.export.generator.Generator`) on a SavedModel.

    The checks of `check_translator_saved_model`, for the signatures `serving_default` and
    `generate` (input `prompt` DT_STRING [-1]) and `generate_with_options` (adds the scalars
    `max_length` DT_INT32, `temperature` DT_FLOAT, `top_k` DT_INT32, `top_p` DT_FLOAT), each
    with outputs `continuation` DT_STRING [-1], `tokens` DT_STRING [-1, -1] and `scores`
    DT_FLOAT [-1]; each runs on `prompts` (an empty string included) with batch-major outputs.

    Raises:
        ContractError: listing every violation.
    """
    prompts = list(prompts or ["the cat", ""])
    options = {
        "prompt": ["string", prompts],
        "max_length": ["int32", 4],
        "temperature": ["float32", 0.8],
        "top_k": ["int32", 5],
        "top_p": ["float32", 0.9],
    }
    feeds = {"*": {"prompt": ["string", prompts]}, "generate_with_options": options}
    report = probe_saved_model(path, prompts, feeds)
    problems = _violations(report, GENERATOR_SIGNATURES, len(prompts))
    if problems:
        raise ContractError(f"{path}: " + "; ".join(problems))
    return report


def check_captioner_saved_model(
    path: str | os.PathLike, images: list[bytes], grid_shape: tuple[int, int]
) -> dict:
    """Verify the captioner contract (`keras_attn.export.captioner.Captioner`) on a SavedModel.

    The checks of `check_translator_saved_model`, for the signatures `serving_default` and
    `caption`: input `image` DT_STRING [-1] (PNG or JPEG bytes), outputs `caption` DT_STRING
    [-1], `tokens` DT_STRING [-1, -1], `scores` DT_FLOAT [-1] and `attention` DT_FLOAT
    [-1, -1, H', W'] (`grid_shape`); each runs on `images` with batch-major outputs.

    Raises:
        ContractError: listing every violation.
    """
    encoded = [base64.b64encode(image).decode("ascii") for image in images]
    report = probe_saved_model(path, [], {"*": {"image": ["base64", encoded]}})
    problems = _violations(report, captioner_signatures(grid_shape), len(images))
    if problems:
        raise ContractError(f"{path}: " + "; ".join(problems))
    return report


def check_answerer_saved_model(
    path: str | os.PathLike,
    images: list[bytes],
    questions: list[str],
    answers: list[str],
    grid_shape: tuple[int, int],
) -> dict:
    """Verify the answerer contract (`keras_attn.export.answerer.Answerer`) on a SavedModel.

    The checks of `check_translator_saved_model`, for the signatures of
    `answerer_signatures(len(answers), grid_shape)`, each fed `images` (PNG or JPEG bytes) and
    `questions` (one per image) and giving batch-major outputs; besides, every `answer` is one
    of `answers` and every row of `scores` sums to 1.

    Raises:
        ContractError: listing every violation.
    """
    encoded = [base64.b64encode(image).decode("ascii") for image in images]
    feeds = {"*": {"image": ["base64", encoded], "question": ["string", list(questions)]}}
    report = probe_saved_model(path, [], feeds)
    problems = _violations(report, answerer_signatures(len(answers), grid_shape), len(images))
    for key, found in report["outputs"].items():
        unknown = sorted(set(found.get("_text", [])) - set(answers))
        if unknown:
            problems.append(f"{key}: answers {unknown} are not among {list(answers)}")
        if not all(abs(sum(row) - 1.0) <= 1e-4 for row in found.get("_scores", [])):
            problems.append(f"{key}: scores are not probabilities (a row does not sum to 1)")
    if problems:
        raise ContractError(f"{path}: " + "; ".join(problems))
    return report


def classifier_signatures(num_classes: int) -> dict:
    """The classifier's signatures (`keras_attn.export.classifier.Classifier`) for
    `num_classes` classes: `serving_default` and `predict` (`text` → `label`, `classes`,
    `scores`) and `classify` (TF Serving's Classification API: serialized tf.Examples `inputs`
    → `classes`, `scores`, both `[-1, num_classes]`)."""
    classes = {"classes": (STRING, [-1, num_classes]), "scores": (FLOAT, [-1, num_classes])}
    predict = ({"text": (STRING, [-1])}, {"label": (STRING, [-1]), **classes})
    return {
        "serving_default": predict,
        "predict": predict,
        "classify": ({"inputs": (STRING, [-1])}, classes),
    }


CLASSIFY_METHOD = "tensorflow/serving/classify"
# The signatures whose method is not PREDICT_METHOD.
CLASSIFIER_METHODS = {"classify": CLASSIFY_METHOD}
TAG_OUTPUTS = {
    "tokens": (STRING, [-1, -1]),
    "tags": (STRING, [-1, -1]),
    "scores": (FLOAT, [-1, -1]),
}
TAGGER_SIGNATURES = {
    "serving_default": ({"text": (STRING, [-1])}, TAG_OUTPUTS),
    "tag": ({"text": (STRING, [-1])}, TAG_OUTPUTS),
}


def serialized_text_examples(texts: list[str], text_feature: str = "text") -> list[bytes]:
    """One serialized tf.Example per text, the text in the bytes feature `text_feature`."""
    import tensorflow as tf

    return [
        tf.train.Example(
            features=tf.train.Features(
                feature={
                    text_feature: tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[text.encode("utf-8")])
                    )
                }
            )
        ).SerializeToString()
        for text in texts
    ]


def check_classifier_saved_model(
    path: str | os.PathLike,
    label_names: list[str],
    texts: list[str] | None = None,
    text_feature: str = "text",
) -> dict:
    """Verify the classifier contract (`keras_attn.export.classifier.Classifier`) on a
    SavedModel.

    The checks of `check_translator_saved_model`, for the signatures of
    `classifier_signatures(len(label_names))`, `classify` with method
    `tensorflow/serving/classify` and fed `texts` as serialized tf.Examples (the bytes feature
    `text_feature`), the others with method `tensorflow/serving/predict` and fed `texts` (an
    empty string included); besides, every `label` is one of `label_names`, every row of
    `scores` sums to 1, and `classify` gives the scores `predict` gives for the same texts.

    Raises:
        ContractError: listing every violation.
    """
    texts = list(texts or ["a short text", ""])
    examples = serialized_text_examples(texts, text_feature)
    encoded = [base64.b64encode(example).decode("ascii") for example in examples]
    feeds = {"*": {"text": ["string", texts]}, "classify": {"inputs": ["base64", encoded]}}
    report = probe_saved_model(path, texts, feeds)
    signatures = classifier_signatures(len(label_names))
    problems = _violations(report, signatures, len(texts), CLASSIFIER_METHODS)
    outputs = report["outputs"]
    for key in ("serving_default", "predict"):
        unknown = sorted(set(outputs.get(key, {}).get("_text", [])) - set(label_names))
        if unknown:
            problems.append(f"{key}: labels {unknown} are not among {list(label_names)}")
    scores = {key: found["_scores"] for key, found in outputs.items() if "_scores" in found}
    for key, rows in scores.items():
        if not all(abs(sum(row) - 1.0) <= 1e-4 for row in rows):  # NaN included
            problems.append(
                f"{key}: scores are not probabilities (a row is not finite or does not sum to 1)"
            )
    if "classify" in scores and "predict" in scores:
        classify, predict = _flat(scores["classify"]), _flat(scores["predict"])
        if len(classify) != len(predict) or any(
            abs(a - b) > 1e-5 for a, b in zip(classify, predict, strict=True)
        ):
            problems.append("classify's scores differ from predict's for the same texts")
    if problems:
        raise ContractError(f"{path}: " + "; ".join(problems))
    return report


def check_tagger_saved_model(
    path: str | os.PathLike, tag_names: list[str], texts: list[str] | None = None
) -> dict:
    """Verify the tagger contract (`keras_attn.export.classifier.Tagger`) on a SavedModel.

    The checks of `check_translator_saved_model`, for the signatures `serving_default` and
    `tag`: input `text` DT_STRING [-1], outputs `tokens` DT_STRING [-1, -1], `tags` DT_STRING
    [-1, -1] and `scores` DT_FLOAT [-1, -1]; each runs on `texts` (an empty string included)
    with batch-major outputs of one shape, and every tag is one of `tag_names` or "" (no word).

    Raises:
        ContractError: listing every violation.
    """
    texts = list(texts or ["a short text", ""])
    report = probe_saved_model(path, texts)
    problems = _violations(report, TAGGER_SIGNATURES, len(texts))
    for key, shapes in report["outputs"].items():
        if not shapes.get("tokens") == shapes.get("tags") == shapes.get("scores"):
            problems.append(f"{key}: tokens, tags and scores differ in shape")
        unknown = sorted(set(shapes.get("_text", [])) - {"", *tag_names})
        if unknown:
            problems.append(f"{key}: tags {unknown} are not among {list(tag_names)}")
    if problems:
        raise ContractError(f"{path}: " + "; ".join(problems))
    return report


def _flat(rows: list) -> list[float]:
    return [value for row in rows for value in row]


def _violations(
    report: dict, signatures: dict, batch: int, methods: dict | None = None
) -> list[str]:
    """Every way the probe's `report` breaks the `signatures` table (see the checks above);
    `methods` gives the method name of a signature that is not `PREDICT_METHOD`."""
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
    for key, (inputs, outputs) in signatures.items():
        signature = report["signatures"].get(key)
        if signature is None:
            problems.append(f"missing signature {key!r}")
            continue
        method = (methods or {}).get(key, PREDICT_METHOD)
        if signature["method"] != method:
            problems.append(f"{key}: method {signature['method']!r}, expected {method!r}")
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
            if not name.startswith("_") and shape[:1] != [batch]:
                problems.append(f"{key}: output {name!r} is not batch-major: shape {shape}")
    return problems
