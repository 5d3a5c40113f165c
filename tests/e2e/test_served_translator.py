"""Train a tiny translator, export it, serve it, and query it with the official stubs only."""

import functools
import subprocess
import sys

import grpc
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from keras_attn.cli import main as cli
from keras_attn.serving.server import ModelServer
from keras_attn.testing.server_process import serve_in_subprocess
from keras_attn.text.corpora import load_corpus

SENTENCES = [source for source, _ in load_corpus("synthetic")["test"][:6]] + [""]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("e2e") / "run"
    assert cli([
        "train", "--steps", "4", "--batch-size", "16", "--units", "16", "--embedding-dim", "8",
        "--vocab-size", "600", "--train-examples", "256",
        "--eval-sentences", "4", "--checkpoint-every", "2",
        "--out", str(run), "--quiet",
    ]) == 0  # fmt: skip
    assert (run / "model.keras").exists() and (run / "metrics.json").exists()
    return run


@pytest.fixture(scope="module")
def model_base_path(run_dir):
    base = run_dir.parent / "models" / "translator"
    assert cli(["export", str(run_dir), "--model_base_path", str(base)]) == 0
    assert (base / "1" / "saved_model.pb").exists()
    return base


@pytest.fixture(scope="module")
def server(model_base_path):
    with serve_in_subprocess(model_base_path, "translator") as running:
        yield running


@pytest.fixture(scope="module")
def stub(server):
    channel = grpc.insecure_channel(server.target)
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel)
    channel.close()


def request(texts, signature="translate", model="translator", key="text"):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = model
    req.model_spec.signature_name = signature
    req.inputs[key].CopyFrom(tf.make_tensor_proto(texts))
    return req


@functools.cache
def load_saved_model(path):
    """Each export is loaded once per module: loading traces every signature again."""
    return tf.saved_model.load(path)


def in_process(model_base_path, signature, texts):
    loaded = load_saved_model(str(model_base_path / "1"))
    outputs = loaded.signatures[signature](text=tf.constant(texts, tf.string))
    return {name: value.numpy() for name, value in outputs.items()}


@pytest.mark.parametrize("signature", ["serving_default", "translate", "translate_with_alignment"])
def test_served_outputs_equal_in_process_saved_model(stub, model_base_path, signature):
    response = stub.Predict(request(SENTENCES, signature), timeout=60)
    expected = in_process(model_base_path, signature, SENTENCES)
    assert set(response.outputs) == set(expected)
    for name, want in expected.items():
        got = tf.make_ndarray(response.outputs[name])
        assert got.shape == want.shape, name
        if want.dtype == np.float32:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)
    assert response.model_spec.name == "translator" and response.model_spec.version.value == 1
    assert tf.make_ndarray(response.outputs["translation"]).shape == (len(SENTENCES),)


def test_alignment_rows_are_distributions_over_real_source_tokens(stub):
    response = stub.Predict(request(SENTENCES[:3], "translate_with_alignment"), timeout=60)
    alignment = tf.make_ndarray(response.outputs["alignment"])
    tokens = tf.make_ndarray(response.outputs["tokens"])
    source_tokens = tf.make_ndarray(response.outputs["source_tokens"])
    assert alignment.shape == (3, tokens.shape[1], source_tokens.shape[1])
    for b in range(3):
        real = source_tokens[b] != b""
        for t in np.flatnonzero(tokens[b] != b""):
            assert alignment[b, t, ~real].sum() == 0.0
            assert alignment[b, t].sum() == pytest.approx(1.0, abs=1e-4)


def test_metadata_and_status_with_official_stubs(server):
    channel = grpc.insecure_channel(server.target)
    prediction = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    meta_request = get_model_metadata_pb2.GetModelMetadataRequest()
    meta_request.model_spec.name = "translator"
    meta_request.metadata_field.append("signature_def")
    meta = prediction.GetModelMetadata(meta_request, timeout=30)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    meta.metadata["signature_def"].Unpack(signature_map)
    signatures = signature_map.signature_def
    assert {"serving_default", "translate", "translate_with_alignment"} <= set(signatures)
    assert set(signatures["translate"].outputs) == {"translation", "tokens", "scores"}
    assert signatures["translate"].method_name == "tensorflow/serving/predict"
    status_request = get_model_status_pb2.GetModelStatusRequest()
    status_request.model_spec.name = "translator"
    status = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(
        status_request, timeout=30
    )
    assert status.model_version_status[0].version == 1
    assert (
        get_model_status_pb2.ModelVersionStatus.State.Name(status.model_version_status[0].state)
        == "AVAILABLE"
    )
    channel.close()


BAD_REQUESTS = [
    (
        request(["hola"], model="nope"),
        grpc.StatusCode.NOT_FOUND,
        "Servable not found for request: Latest(nope)",
    ),
    (
        request(["hola"], signature="nope"),
        grpc.StatusCode.FAILED_PRECONDITION,
        'Serving signature key "nope" not found.',
    ),
    (request(["hola"], key="sentence"), grpc.StatusCode.INVALID_ARGUMENT, "sentence"),
    (request(np.array([1.0, 2.0], np.float32)), grpc.StatusCode.INVALID_ARGUMENT, ""),
    (request(np.array([["a", "b"]])), grpc.StatusCode.INVALID_ARGUMENT, ""),
]


@pytest.mark.parametrize("bad,code,message", BAD_REQUESTS)
def test_bad_requests_get_stock_status_and_server_keeps_answering(
    stub, model_base_path, bad, code, message
):
    with pytest.raises(grpc.RpcError) as caught:
        stub.Predict(bad, timeout=30)
    assert caught.value.code() == code
    assert message in caught.value.details()
    good = stub.Predict(request(SENTENCES[:2]), timeout=60)
    expected = in_process(model_base_path, "translate", SENTENCES[:2])["translation"]
    np.testing.assert_array_equal(tf.make_ndarray(good.outputs["translation"]), expected)


def test_translate_cli_against_the_server(server, model_base_path):
    command = [
        sys.executable, "-m", "keras_attn.cli", "translate", "--server", server.target,
        "--model_name", "translator",
    ]  # fmt: skip
    completed = subprocess.run(
        [*command, *SENTENCES[:3]], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    expected = [
        t.decode() for t in in_process(model_base_path, "translate", SENTENCES[:3])["translation"]
    ]
    assert completed.stdout.splitlines() == expected


@pytest.mark.slow
def test_beam_search_export_served_over_grpc(run_dir):
    """`--decoder beam` exports the same signatures; served answers equal the in-process ones.

    The export is served by the in-process `ModelServer`, the server `keras-attn serve` runs
    (the command line is tested above); the beam export's contract check runs in
    tests/export/test_cli.py."""
    base = run_dir.parent / "models" / "translator_beam"
    flags = ["--decoder", "beam", "--beam-size", "3", "--length-penalty", "0.6", "--skip-check"]
    assert cli(["export", str(run_dir), "--model_base_path", str(base), *flags]) == 0
    with (
        ModelServer("translator_beam", str(base), port=0) as running,
        grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel,
    ):
        beam_stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        for signature in ("translate", "translate_with_alignment"):
            response = beam_stub.Predict(
                request(SENTENCES, signature, model="translator_beam"), timeout=60
            )
            expected = in_process(base, signature, SENTENCES)
            assert set(response.outputs) == set(expected)
            for name, want in expected.items():
                got = tf.make_ndarray(response.outputs[name])
                if want.dtype == np.float32:
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
                else:
                    np.testing.assert_array_equal(got, want)
    alignment, tokens = expected["alignment"], expected["tokens"]
    for b in range(len(SENTENCES)):
        real = expected["source_tokens"][b] != b""
        for t in np.flatnonzero(tokens[b] != b""):
            assert alignment[b, t, ~real].sum() == 0.0
            # A distribution over the real source tokens; the empty sentence has none.
            total = 1.0 if real.any() else 0.0
            assert alignment[b, t].sum() == pytest.approx(total, abs=1e-4)
