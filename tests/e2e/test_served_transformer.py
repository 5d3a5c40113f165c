"""Transformer translator (beam search) and GPT generator: export, serve, query over gRPC.

Each model is a tiny untrained run (`tests.export.conftest.write_tiny_run`: the run directory
`keras-attn train` writes, seeded random weights): the claim — what the server answers equals
what the exported SavedModel computes in process — holds for any weights, and training through
the CLI is tested in tests/training and by the trained flagship run of test_served_translator.py.
Both exports are served by one in-process `ModelServer`, the server `keras-attn serve` runs (the
command line itself is tested in test_served_translator.py and tests/serving).
"""

import grpc
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from tensorflow_serving.config import model_server_config_pb2

from keras_attn.cli import main as cli
from keras_attn.serving.server import ModelServer
from keras_attn.text.corpora import load_corpus
from tests.export.conftest import write_tiny_run

pytestmark = pytest.mark.slow

SENTENCES = [source for source, _ in load_corpus("synthetic")["test"][:4]] + [""]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The model base paths of the beam-search transformer and of the GPT generator."""
    root = tmp_path_factory.mktemp("e2e_transformer")
    transformer = write_tiny_run(root / "transformer-run", "transformer", num_layers=2)
    gpt = write_tiny_run(root / "gpt-run", "gpt", max_length=12)
    bases = {"transformer": root / "models" / "transformer", "lm": root / "models" / "lm"}
    assert cli([
        "export", str(transformer.path), "--model_base_path", str(bases["transformer"]),
        "--decoder", "beam", "--beam-size", "3", "--max-output-length", "24",
    ]) == 0  # fmt: skip
    # The contract check of a GPT export runs in tests/export/test_every_family.py.
    assert cli([
        "export", str(gpt.path), "--model_base_path", str(bases["lm"]),
        "--max-output-length", "12", "--skip-check",
    ]) == 0  # fmt: skip
    return bases


@pytest.fixture(scope="module")
def stub(exports):
    config = model_server_config_pb2.ModelServerConfig()
    for name, base in exports.items():
        config.model_config_list.config.add(
            name=name, base_path=str(base), model_platform="tensorflow"
        )
    with (
        ModelServer(model_config=config, port=0, file_system_poll_wait_seconds=0) as server,
        grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def predict(stub, name, signature, inputs):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    for key, value in inputs.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    response = stub.Predict(request, timeout=120)
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


def test_served_transformer_translator_with_beam_search(exports, stub):
    loaded = tf.saved_model.load(str(exports["transformer"] / "1"))
    for signature in ("serving_default", "translate", "translate_with_alignment"):
        got = predict(stub, "transformer", signature, {"text": SENTENCES})
        assert_same(got, loaded.signatures[signature](text=tf.constant(SENTENCES)))
        assert (got["tokens"] != b"").any()  # the beam search decoded something


def test_served_gpt_generator(exports, stub):
    loaded = tf.saved_model.load(str(exports["lm"] / "1"))
    targets = [target for _, target in load_corpus("synthetic")["test"][:3]]
    prompts = targets + [""]
    options = {
        "max_length": np.int32(5),
        "temperature": np.float32(0.0),
        "top_k": np.int32(0),
        "top_p": np.float32(1.0),
    }
    for signature in ("serving_default", "generate"):
        got = predict(stub, "lm", signature, {"prompt": prompts})
        assert_same(got, loaded.signatures[signature](prompt=tf.constant(prompts)))
    got = predict(stub, "lm", "generate_with_options", {"prompt": prompts, **options})
    expected = loaded.signatures["generate_with_options"](
        prompt=tf.constant(prompts), **{k: tf.constant(v) for k, v in options.items()}
    )
    assert_same(got, expected)
    assert got["tokens"].shape[1] <= 5
