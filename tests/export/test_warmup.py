"""Warm-up requests written at export: stock format, valid against the model, replayed on load."""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from keras_attn.export.saved_model import export_translator
from keras_attn.export.warmup import (
    WARMUP_TEXTS,
    classifier_warmup_feeds,
    generator_warmup_feeds,
    tagger_warmup_feeds,
    translator_warmup_feeds,
    write_warmup_requests,
)
from keras_attn.formats import warmup_path
from keras_attn.serving.client import TranslatorClient
from keras_attn.serving.servable import LoadError
from keras_attn.serving.server import ModelServer

SIGNATURES = ["serving_default", "translate", "translate_with_alignment"]


def read_logs(path):
    logs = []
    for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog()
        log.ParseFromString(record)
        logs.append(log)
    return logs


def test_export_writes_replayable_warmup_requests(translator, tmp_path, caplog):
    version = export_translator(translator, tmp_path / "translator", check=False)
    path = version / "assets.extra" / "tf_serving_warmup_requests"
    logs = read_logs(path)
    assert [log.WhichOneof("log_type") for log in logs] == ["predict_log"] * 3
    requests = [log.predict_log.request for log in logs]
    assert [r.model_spec.signature_name for r in requests] == SIGNATURES
    for request in requests:
        assert list(request.inputs) == ["text"]
        texts = tf.make_ndarray(request.inputs["text"])
        assert texts.shape == (len(WARMUP_TEXTS),)
        assert [t.decode() for t in texts] == list(WARMUP_TEXTS)

    # The server replays every request before the version becomes AVAILABLE (a failing request
    # would fail the load), and says so with stock's log line.
    caplog.set_level(logging.INFO, logger="keras_attn.serving.manager")
    with ModelServer("translator", str(tmp_path / "translator"), port=0) as server:
        replayed = [r.getMessage() for r in caplog.records if "warmup" in r.getMessage()]
        assert len(replayed) == 1, replayed
        assert replayed[0].startswith(f"Finished reading warmup data for model at {version}.")
        assert "Number of warmup records read: 3." in replayed[0]
        with TranslatorClient(f"127.0.0.1:{server.port}", "translator", 30) as client:
            expected = translator.translate(tf.constant(["el gato"]))["translation"].numpy()
            assert client.translate(["el gato"]) == [expected[0].decode()]


def test_a_broken_warmup_request_fails_the_load(translator, tmp_path):
    version = export_translator(translator, tmp_path / "translator", check=False, warmup_texts=None)
    assert not os.path.exists(
        warmup_path(version)
    )  # no warm-up file (the export keeps its description)
    write_warmup_requests(version, {"translate": {"source": np.array([b"x"], dtype=object)}})
    with pytest.raises(LoadError, match="source"):
        ModelServer(
            "translator", str(tmp_path / "translator"), port=0, max_num_load_retries=0
        ).start()


def test_generator_feeds_carry_the_scalar_options():
    feeds = generator_warmup_feeds(["a b"])
    assert sorted(feeds) == ["generate", "generate_with_options", "serving_default"]
    assert list(feeds["generate"]) == ["prompt"]
    options = feeds["generate_with_options"]
    assert sorted(options) == ["max_length", "prompt", "temperature", "top_k", "top_p"]
    proto = tf.make_tensor_proto(options["max_length"])
    assert proto.dtype == tf.int32.as_datatype_enum and not proto.tensor_shape.dim
    assert tf.make_tensor_proto(options["top_p"]).dtype == tf.float32.as_datatype_enum


def test_empty_feeds_are_refused(tmp_path):
    with pytest.raises(ValueError, match="feeds is empty"):
        write_warmup_requests(tmp_path, {})
    assert sorted(translator_warmup_feeds(["x"])) == sorted(SIGNATURES)


def test_classifier_feeds_hold_a_classify_log_of_tf_examples(tmp_path):
    feeds = classifier_warmup_feeds(["a cat", ""], text_feature="sentence")
    path = write_warmup_requests(tmp_path, feeds)
    logs = read_logs(path)
    assert [log.WhichOneof("log_type") for log in logs] == ["predict_log"] * 2 + ["classify_log"]
    assert [log.predict_log.request.model_spec.signature_name for log in logs[:2]] == [
        "serving_default",
        "predict",
    ]
    for log in logs[:2]:
        assert tf.make_ndarray(log.predict_log.request.inputs["text"]).tolist() == [b"a cat", b""]
    request = logs[2].classify_log.request
    assert request.model_spec.signature_name == "classify" and not request.model_spec.name
    texts = [
        example.features.feature["sentence"].bytes_list.value[:]
        for example in request.input.example_list.examples
    ]
    assert texts == [[b"a cat"], [b""]]
    assert sorted(tagger_warmup_feeds(["x"])) == ["serving_default", "tag"]
