"""Fixture SavedModels and a running in-process server for the serving tests.

`translator` has the exported translator's exact signatures (names, keys, dtypes, shapes) with a
trivial deterministic computation through a tf-text op: whitespace tokens, words reversed as the
translation, token counts as scores, an identity alignment. `calculator` is a second, generic
model: `serving_default` parses numbers (bad strings fail at run time) and `classify` / `regress`
read tf.Examples, so Classify/Regress/MultiInference have a signature they can run. `spinner`
runs as long as a request asks (for deadlines, cancellation and shutdown).
"""

from __future__ import annotations

import os
import shutil

import grpc
import pytest
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from keras_attn.serving.server import ModelServer

MODEL_NAME = "translator"
LATEST_VERSION = 3
TEXT_SPEC = tf.TensorSpec([None], tf.string, name="text")
EXAMPLES_SPEC = tf.TensorSpec([None], tf.string, name="inputs")


class FixtureTranslator(tf.Module):
    """Reverses the whitespace tokens of each text; the translator's signatures and dtypes."""

    def __init__(self):
        super().__init__()
        self.tokenizer = tf_text.WhitespaceTokenizer()

    def _translate(self, text):
        words = self.tokenizer.tokenize(text)  # ragged (batch, None)
        lengths = words.row_lengths()
        source = words.to_tensor(default_value="")  # (batch, S)
        target = tf.reverse_sequence(source, lengths, seq_axis=1, batch_axis=0)  # (batch, S)
        ragged_target = tf.RaggedTensor.from_tensor(target, lengths=lengths)
        translation = tf.strings.reduce_join(ragged_target, axis=1, separator=" ")  # (batch,)
        return translation, target, tf.cast(lengths, tf.float32), source

    @tf.function(input_signature=[TEXT_SPEC])
    def translate(self, text):
        translation, tokens, scores, _ = self._translate(text)
        return {"translation": translation, "tokens": tokens, "scores": scores}

    @tf.function(input_signature=[TEXT_SPEC])
    def translate_with_alignment(self, text):
        translation, tokens, scores, source = self._translate(text)
        length = tf.shape(tokens)[1]
        eye = tf.cast(tf.equal(tf.range(length)[:, None], tf.range(length)[None, :]), tf.float32)
        alignment = tf.tile(eye[None], [tf.shape(tokens)[0], 1, 1])  # (batch, T, S)
        return {
            "translation": translation,
            "tokens": tokens,
            "scores": scores,
            "alignment": alignment,
            "source_tokens": source,
        }


class FixtureCalculator(tf.Module):
    """A generic model: number parsing, and tf.Example classification and regression."""

    @tf.function(input_signature=[TEXT_SPEC])
    def parse(self, text):
        return {"value": tf.strings.to_number(text, tf.float32)}

    def _x(self, serialized):
        features = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})
        return features["x"][:, 0]  # (batch,)

    @tf.function(input_signature=[EXAMPLES_SPEC])
    def classify(self, inputs):
        x = self._x(inputs)
        scores = tf.stack([tf.sigmoid(-x), tf.sigmoid(x)], axis=1)  # (batch, 2)
        classes = tf.tile(tf.constant([["neg", "pos"]]), [tf.shape(x)[0], 1])  # (batch, 2)
        return {"classes": classes, "scores": scores}

    @tf.function(input_signature=[EXAMPLES_SPEC])
    def regress(self, inputs):
        return {"outputs": 2.0 * self._x(inputs)}


class FixtureSpinner(tf.Module):
    """A model whose run time the request sets: each text is a number of loop steps, and the
    batch spins for the largest (a stand-in for a long decoding loop; "1000000000" is hours)."""

    @tf.function(input_signature=[TEXT_SPEC])
    def spin(self, text):
        steps = tf.strings.to_number(text, tf.int64)  # (batch,)
        total = tf.reduce_max(tf.concat([steps, [0]], axis=0))

        def body(i, x):
            return i + 1, tf.sin(x) + 1.0

        start = (tf.constant(0, tf.int64), tf.zeros([64]))
        _, x = tf.while_loop(lambda i, x: i < total, body, start)
        return {"translation": text, "steps": steps + tf.cast(0.0 * x[0], tf.int64)}


def save_translator(path: str) -> None:
    module = FixtureTranslator()
    signatures = {
        "serving_default": module.translate,
        "translate": module.translate,
        "translate_with_alignment": module.translate_with_alignment,
    }
    tf.saved_model.save(module, path, signatures=signatures)


def save_calculator(path: str) -> None:
    module = FixtureCalculator()
    signatures = {
        "serving_default": module.parse,
        "classify": module.classify,
        "regress": module.regress,
    }
    tf.saved_model.save(module, path, signatures=signatures)


@pytest.fixture(scope="session")
def model_base_path(tmp_path_factory) -> str:
    """`translator/` with versions 1 and 3 and two non-integer entries that must be ignored."""
    base = tmp_path_factory.mktemp("models") / MODEL_NAME
    latest = base / str(LATEST_VERSION)
    save_translator(str(latest))
    shutil.copytree(latest, base / "1")
    shutil.copytree(latest, base / "tmp-export")
    (base / "README").write_text("not a version\n")
    return str(base)


@pytest.fixture(scope="session")
def latest_path(model_base_path) -> str:
    return os.path.join(model_base_path, str(LATEST_VERSION))


@pytest.fixture(scope="session")
def reference(latest_path):
    """The latest fixture version loaded in this process, to compare served outputs against."""
    return tf.saved_model.load(latest_path)


@pytest.fixture(scope="session")
def calculator_base_path(tmp_path_factory) -> str:
    base = tmp_path_factory.mktemp("models") / "calculator"
    save_calculator(str(base / "7"))
    return str(base)


@pytest.fixture(scope="session")
def spinner_base_path(tmp_path_factory) -> str:
    """`spinner/1`: a model that loops as many steps as its input says."""
    base = tmp_path_factory.mktemp("models") / "spinner"
    module = FixtureSpinner()
    tf.saved_model.save(module, str(base / "1"), signatures={"serving_default": module.spin})
    return str(base)


@pytest.fixture(scope="session")
def server(model_base_path):
    """The translator served in this process on free ports (gRPC and REST)."""
    model_server = ModelServer(MODEL_NAME, model_base_path, port=0, rest_api_port=0).start()
    yield model_server
    model_server.stop(grace=1.0)


@pytest.fixture(scope="session")
def calculator_server(calculator_base_path):
    model_server = ModelServer("calculator", calculator_base_path, port=0).start()
    yield model_server
    model_server.stop(grace=1.0)


@pytest.fixture(scope="session")
def target(server) -> str:
    return f"127.0.0.1:{server.port}"


@pytest.fixture(scope="session")
def channel(target):
    with grpc.insecure_channel(target) as grpc_channel:
        yield grpc_channel


@pytest.fixture(scope="session")
def prediction_stub(channel):
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


@pytest.fixture(scope="session")
def model_stub(channel):
    return model_service_pb2_grpc.ModelServiceStub(channel)


@pytest.fixture(scope="session")
def calculator_stub(calculator_server):
    with grpc.insecure_channel(f"127.0.0.1:{calculator_server.port}") as grpc_channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(grpc_channel)


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on (bound once, then released)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
