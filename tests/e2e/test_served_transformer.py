"""Transformer translator and GPT generator end to end: train, export, serve, query over gRPC."""

import grpc
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_attn.cli import main as cli
from keras_attn.testing.server_process import serve_in_subprocess
from keras_attn.text.corpora import load_corpus

# Training, two exports and two server starts take minutes on a loaded 2-core machine: kept out
# of `make test`. The in-process export contracts are tested in tests/export.
pytestmark = pytest.mark.slow

SENTENCES = [source for source, _ in load_corpus("synthetic")["test"][:4]] + [""]


def predict(server, name, signature, inputs):
    channel = grpc.insecure_channel(server.target)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    for key, value in inputs.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    response = stub.Predict(request, timeout=120)
    channel.close()
    return {key: tf.make_ndarray(value) for key, value in response.outputs.items()}


def assert_same(got, expected):
    assert set(got) == set(expected)
    for name, want in expected.items():
        want = want.numpy()
        assert got[name].shape == want.shape, name
        if want.dtype == np.float32:
            np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(got[name], want)


def test_served_transformer_translator_with_beam_search(tmp_path):
    run = tmp_path / "run"
    assert cli([
        "train", "--model", "transformer", "--num-layers", "2", "--d-model", "32",
        "--num-heads", "4", "--ff-dim", "64", "--steps", "30", "--batch-size", "32",
        "--vocab-size", "600", "--eval-sentences", "10", "--checkpoint-every", "30",
        "--out", str(run), "--quiet",
    ]) == 0  # fmt: skip
    base = tmp_path / "models" / "transformer"
    assert cli([
        "export", str(run), "--model_base_path", str(base), "--decoder", "beam",
        "--beam-size", "3", "--max-output-length", "24",
    ]) == 0  # fmt: skip
    loaded = tf.saved_model.load(str(base / "1"))
    with serve_in_subprocess(base, "transformer") as server:
        for signature in ("serving_default", "translate", "translate_with_alignment"):
            got = predict(server, "transformer", signature, {"text": SENTENCES})
            assert_same(got, loaded.signatures[signature](text=tf.constant(SENTENCES)))


def test_served_gpt_generator(tmp_path):
    run = tmp_path / "lm-run"
    assert cli([
        "train", "--model", "gpt", "--num-layers", "1", "--d-model", "16", "--num-heads", "2",
        "--ff-dim", "32", "--steps", "30", "--batch-size", "32", "--vocab-size", "300",
        "--max-length", "12", "--eval-sentences", "10", "--checkpoint-every", "30",
        "--out", str(run), "--quiet",
    ]) == 0  # fmt: skip
    base = tmp_path / "models" / "lm"
    assert (
        cli(["export", str(run), "--model_base_path", str(base), "--max-output-length", "12"]) == 0
    )
    loaded = tf.saved_model.load(str(base / "1"))
    targets = [target for _, target in load_corpus("synthetic")["test"][:3]]
    prompts = targets + [""]
    options = {
        "max_length": np.int32(5),
        "temperature": np.float32(0.0),
        "top_k": np.int32(0),
        "top_p": np.float32(1.0),
    }
    with serve_in_subprocess(base, "lm") as server:
        for signature in ("serving_default", "generate"):
            got = predict(server, "lm", signature, {"prompt": prompts})
            assert_same(got, loaded.signatures[signature](prompt=tf.constant(prompts)))
        got = predict(server, "lm", "generate_with_options", {"prompt": prompts, **options})
        expected = loaded.signatures["generate_with_options"](
            prompt=tf.constant(prompts), **{k: tf.constant(v) for k, v in options.items()}
        )
        assert_same(got, expected)
        assert got["tokens"].shape[1] <= 5
