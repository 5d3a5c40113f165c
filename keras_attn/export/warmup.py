"""Warm-up requests written into an exported SavedModel, in the stock TF Serving format.

`VERSION/assets.extra/tf_serving_warmup_requests` is a TFRecord file of
`tensorflow_serving.apis.prediction_log_pb2.PredictionLog` messages, each with a
`predict_log.request` (a `PredictRequest`), or, for a classifier's `classify` signature, a
`classify_log.request` (a `ClassificationRequest` of tf.Examples). Stock TensorFlow Serving
(`--enable_model_warmup`, on by default) and `keras-attn serve` run every request once against a
freshly loaded version before it becomes AVAILABLE, so the first client request does not pay
for graph initialisation (lookup tables, `tf.function` tracing, memory allocation).

One request per signature, each with a small batch of texts: an ordinary sentence, a longer one
(more decoding steps) and an empty string (the padded, degenerate batch). The batch stays far
below any sensible `max_batch_size`: with `--enable_batching` the warm-up requests go through the
batcher, and a request larger than `max_batch_size` fails the load.

A compiled export (`jit_compile`) adds one request per shape bucket (`bucket_warmup_feeds`): XLA
compiles once per (batch, length) bucket, so all compiling happens while the version loads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from keras_attn.export.contract import (
    GENERATOR_SIGNATURES,
    TAGGER_SIGNATURES,
    TRANSLATOR_SIGNATURES,
    serialized_text_examples,
)
from keras_attn.formats import MAX_WARMUP_RECORDS, warmup_path

WARMUP_TEXTS = (
    "Ein kleiner Test.",
    "This sentence is a little longer, so that decoding runs for more steps than the first one.",
    "",
)
# The scalar options of `generate_with_options` in its warm-up request.
GENERATOR_WARMUP_OPTIONS = {
    "max_length": np.int32(4),
    "temperature": np.float32(0.8),
    "top_k": np.int32(5),
    "top_p": np.float32(0.9),
}

Feeds = Mapping[str, Mapping[str, np.ndarray]]
# Several requests per signature: (signature name, inputs) pairs, or whole `PredictionLog`s
# (a `classify_log`), written in order.
FeedList = Sequence[tuple[str, Mapping[str, np.ndarray]] | prediction_log_pb2.PredictionLog]


def predict_log(
    signature_name: str, inputs: Mapping[str, np.ndarray]
) -> prediction_log_pb2.PredictionLog:
    """A `PredictionLog` whose `predict_log.request` calls `signature_name` with `inputs`.

    The request names no model: the server runs warm-up requests against the version it is
    loading, whatever model name it serves it under.
    """
    log = prediction_log_pb2.PredictionLog()
    request = log.predict_log.request
    request.model_spec.signature_name = signature_name
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return log


def classify_log(
    signature_name: str, examples: Sequence[bytes]
) -> prediction_log_pb2.PredictionLog:
    """A `PredictionLog` whose `classify_log.request` runs `signature_name` (a Classify
    signature) on `examples`, serialized tf.Examples; like `predict_log`, it names no model."""
    log = prediction_log_pb2.PredictionLog()
    request = log.classify_log.request
    request.model_spec.signature_name = signature_name
    for example in examples:
        request.input.example_list.examples.add().ParseFromString(example)
    return log


def write_warmup_requests(version_path: str | os.PathLike, feeds: Feeds | FeedList) -> Path:
    """Write the warm-up requests of `feeds` into `version_path/assets.extra/`, in order.

    Args:
        version_path: the SavedModel directory (a version directory, or the temporary directory
            an export writes before publishing it).
        feeds: signature name -> input name -> value (a NumPy array, or a NumPy scalar for a
            scalar input), one request per signature; or a sequence of
            `(signature name, inputs)` pairs and `PredictionLog`s (`classify_log`), one request
            each.

    Returns:
        The written file.

    Raises:
        ValueError: no feeds, or more records than a server replays (1000).
    """
    if not feeds:
        raise ValueError("No warm-up requests to write: feeds is empty")
    if len(feeds) > MAX_WARMUP_RECORDS:
        raise ValueError(
            f"{len(feeds)} warm-up requests; TF Serving replays at most {MAX_WARMUP_RECORDS}"
        )
    path = Path(warmup_path(str(version_path)))
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for entry in feeds.items() if isinstance(feeds, Mapping) else feeds:
            if not isinstance(entry, prediction_log_pb2.PredictionLog):
                entry = predict_log(*entry)
            writer.write(entry.SerializeToString())
    return path


def translator_warmup_feeds(texts: Sequence[str] = WARMUP_TEXTS) -> dict:
    """Feeds for every translator signature: input `text`, DT_STRING `[len(texts)]`."""
    text = np.array([t.encode("utf-8") for t in texts], dtype=object)
    return {signature: {"text": text} for signature in TRANSLATOR_SIGNATURES}


def generator_warmup_feeds(prompts: Sequence[str] = WARMUP_TEXTS) -> dict:
    """Feeds for every generator signature: `prompt`, plus the scalar options where taken."""
    prompt = np.array([p.encode("utf-8") for p in prompts], dtype=object)
    feeds = {}
    for signature, (inputs, _) in GENERATOR_SIGNATURES.items():
        feeds[signature] = {"prompt": prompt}
        feeds[signature].update({k: v for k, v in GENERATOR_WARMUP_OPTIONS.items() if k in inputs})
    return feeds


def classifier_warmup_feeds(
    texts: Sequence[str] = WARMUP_TEXTS, text_feature: str = "text"
) -> list:
    """Requests for every classifier signature (`keras_attn.export.classifier.Classifier`): a
    `classify_log` of `classify` on one tf.Example per text (the bytes feature `text_feature`),
    and a `PredictRequest` of `serving_default` and of `predict` on `texts`."""
    text = np.array([t.encode("utf-8") for t in texts], dtype=object)
    return [
        ("serving_default", {"text": text}),
        ("predict", {"text": text}),
        classify_log("classify", serialized_text_examples(list(texts), text_feature)),
    ]


def tagger_warmup_feeds(texts: Sequence[str] = WARMUP_TEXTS) -> dict:
    """Feeds for every tagger signature: input `text`, DT_STRING `[len(texts)]`."""
    text = np.array([t.encode("utf-8") for t in texts], dtype=object)
    return {signature: {"text": text} for signature in TAGGER_SIGNATURES}


def filler_word(tokenizer) -> str:
    """A word of `tokenizer`'s vocabulary that tokenizes to exactly one id (warm-up texts of a
    chosen length repeat it).

    Raises:
        ValueError: no alphabetic whole-word entry in the vocabulary is a single token.
    """
    words = [w for w in tokenizer.vocab if w.isalpha() and w.isascii()][:64]
    if words:
        counts = tokenizer.tokenize(tf.constant(words)).row_lengths().numpy()
        for word, count in zip(words, counts, strict=True):
            if count == 1:
                return word
    raise ValueError("The vocabulary has no alphabetic word that is a single token")


def bucket_warmup_feeds(
    signature_name: str,
    input_name: str,
    word: str,
    batch_buckets: Sequence[int],
    length_buckets: Sequence[int],
    extra_tokens: int = 0,
    options: Mapping[str, np.ndarray] | None = None,
) -> list[tuple[str, dict]]:
    """One request of `signature_name` per (batch, length) bucket, smallest first.

    The request for `(b, n)` holds `b` texts of `n - extra_tokens` words `word` (a single token
    each, `filler_word`), so its ids fill the length bucket `n` exactly: `extra_tokens` counts
    the ids the export adds (1 for the generator's START). `options` are further inputs of
    every request (the generator's scalar options).
    """
    feeds = []
    for batch in batch_buckets:
        for length in length_buckets:
            text = " ".join([word] * max(length - extra_tokens, 0)).encode("utf-8")
            inputs = {input_name: np.array([text] * batch, dtype=object), **(options or {})}
            feeds.append((signature_name, inputs))
    return feeds
