"""rnn-luong (local-m attention): export, serve, query over gRPC with the official stubs.

The run is a tiny untrained one (`tests.export.conftest.write_tiny_run`: the run directory
`keras-attn train` writes, seeded random weights): served answers equal the SavedModel's in
process for any weights, and local-m's alignment rows stay inside their window whatever the
weights. Training through the CLI is tested in tests/training and by the trained flagship run of
test_served_translator.py; the export is served by the in-process `ModelServer`, the server
`keras-attn serve` runs.
"""

import grpc
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_attn.cli import main as cli
from keras_attn.serving.server import ModelServer
from keras_attn.text.corpora import load_corpus
from tests.export.conftest import write_tiny_run

pytestmark = pytest.mark.slow

SENTENCES = [source for source, _ in load_corpus("synthetic")["test"][:4]] + [""]
SIGNATURES = ("serving_default", "translate", "translate_with_alignment")


@pytest.fixture(scope="module")
def model_base_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e_luong")
    run = write_tiny_run(root / "run", "rnn-luong", attention="local-m", window=4)
    base = root / "models" / "luong"
    assert cli(["export", str(run.path), "--model_base_path", str(base)]) == 0
    return base


def test_served_luong_translator_equals_the_saved_model_in_process(model_base_path):
    loaded = tf.saved_model.load(str(model_base_path / "1"))
    with (
        ModelServer("luong", str(model_base_path), port=0) as server,
        grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        for signature in SIGNATURES:
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "luong"
            request.model_spec.signature_name = signature
            request.inputs["text"].CopyFrom(tf.make_tensor_proto(SENTENCES))
            response = stub.Predict(request, timeout=60)
            expected = loaded.signatures[signature](text=tf.constant(SENTENCES))
            assert set(response.outputs) == set(expected), signature
            for name, want in expected.items():
                got, want = tf.make_ndarray(response.outputs[name]), want.numpy()
                assert got.shape == want.shape, (signature, name)
                if want.dtype == np.float32:
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
                else:
                    np.testing.assert_array_equal(got, want)
    alignment = expected["alignment"].numpy()
    tokens = expected["tokens"].numpy()
    source_tokens = expected["source_tokens"].numpy()
    assert (tokens != b"").any()  # rows to check below
    for b in range(len(SENTENCES)):  # local-m rows: distributions over real source tokens
        real = source_tokens[b] != b""
        for t in np.flatnonzero(tokens[b] != b""):
            assert alignment[b, t, ~real].sum() == 0.0
            window = np.abs(np.arange(real.size) - t) <= 4
            assert alignment[b, t, ~window].sum() == 0.0
            if (real & window).any():
                assert alignment[b, t].sum() == pytest.approx(1.0, abs=1e-4)
