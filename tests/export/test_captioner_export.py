"""The exported image captioner: image bytes decoded in the graph, captions with their scores and
attention maps, and a `keras-attn train`ed Show, Attend and Tell run served over gRPC and REST (by
the model server `keras-attn serve` runs, in this process: the command line is tested in
tests/e2e)."""

import base64
import json
import urllib.request

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.export.captioner import Captioner, export_captioner, sample_images
from keras_attn.export.cli import export_run
from keras_attn.export.contract import ContractError, check_captioner_saved_model
from keras_attn.formats import RunDirectory
from keras_attn.models.show_attend_tell.model import show_attend_tell
from keras_attn.models.show_attend_tell.steps import ShowAttendTellSteps
from keras_attn.serving.client import parse_response_outputs
from keras_attn.serving.server import ModelServer
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.training.tasks.captioning import caption_vocabulary
from keras_attn.vision import encode_png, scene_splits

SIZE, GRID = 32, (4, 4)
SCENES = scene_splits(5, {"test": 3}, image_size=SIZE)["test"]
PNGS = [encode_png(scene.image) for scene in SCENES]


def captioner(attention="soft", **kwargs) -> Captioner:
    """An untrained tiny captioner over the caption vocabulary (32-pixel images, 4x4 regions)."""
    keras.utils.set_random_seed(3)
    tokenizer = WordPieceTokenizer(caption_vocabulary())
    model = show_attend_tell(
        tokenizer.vocab_size, SIZE, attention=attention, embedding_dim=8, units=16,
        encoder_filters=(4, 8, 8), dropout=0.0,
    )  # fmt: skip
    return Captioner(model, ShowAttendTellSteps(model), tokenizer, **kwargs)


def teacher_forced_score(module: Captioner, image: np.ndarray, tokens: list[str]) -> float:
    """Sum of the model's log-probabilities of `tokens` (and END, when the caption ended)."""
    vocab = module.tokenizer.vocab
    ids = [vocab.index(token) for token in tokens]
    if len(ids) < module.max_output_length:
        ids.append(module.tokenizer.end_id)
    inputs = np.array([[module.tokenizer.start_id, *ids[:-1]]], "int32")
    logits = module.model({"images": image[None], "target_ids": inputs})["logits"][0]
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32)).numpy()
    return float(sum(log_probs[t, token] for t, token in enumerate(ids)))


def rows(outputs, row):
    """Row `row`'s caption words (padding dropped) and attention maps."""
    tokens = [t.decode() if isinstance(t, bytes) else t for t in outputs["tokens"][row]]
    words = [t for t in tokens if t]
    return words, np.asarray(outputs["attention"])[row]


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_captions_of_image_bytes_with_their_scores_and_attention_maps(attention):
    module = captioner(attention, max_output_length=6)
    outputs = {k: v.numpy() for k, v in module.caption(tf.constant(PNGS)).items()}
    pixels = module.caption_pixels(tf.constant(np.stack([s.image for s in SCENES])))
    np.testing.assert_array_equal(outputs["caption"], pixels["caption"].numpy())
    np.testing.assert_allclose(outputs["attention"], pixels["attention"].numpy(), atol=1e-6)
    width = outputs["tokens"].shape[1]
    assert outputs["attention"].shape == (len(PNGS), width, *GRID) and width >= 1
    for row, scene in enumerate(SCENES):
        words, maps = rows(outputs, row)
        assert outputs["caption"][row].decode() == " ".join(words)
        expected = teacher_forced_score(module, scene.image, words)
        np.testing.assert_allclose(outputs["scores"][row], expected, rtol=1e-4, atol=1e-4)
        # One map per word, each a distribution over the 4x4 regions; none past the caption.
        sums = maps.reshape(width, -1).sum(-1)
        np.testing.assert_allclose(sums[: len(words)], 1.0, atol=1e-5)
        assert (maps[len(words) :] == 0).all()
        if attention == "hard":  # the one most probable region
            assert ((maps[: len(words)] == 0) | (maps[: len(words)] == 1)).all()


def test_images_of_another_size_or_mode_are_decoded_to_the_models_size():
    module = captioner()
    colour = np.array([200, 40, 90], np.uint8)
    large = np.broadcast_to(colour, (2 * SIZE, 3 * SIZE, 3)).copy()
    gray = np.full((SIZE, SIZE, 1), 77, np.uint8)
    images = [
        tf.io.encode_jpeg(large, quality=100).numpy(),
        tf.io.encode_png(gray).numpy(),
        PNGS[0],
    ]
    decoded = module.decode_images(tf.constant(images)).numpy()
    assert decoded.shape == (3, SIZE, SIZE, 3) and decoded.dtype == np.uint8
    assert np.abs(decoded[0].astype(int) - colour).max() <= 2  # JPEG rounding
    assert (decoded[1] == 77).all()
    np.testing.assert_array_equal(decoded[2], SCENES[0].image)
    with pytest.raises(tf.errors.InvalidArgumentError):
        module.caption(tf.constant([b"not an image"]))


def test_beam_decoding_and_bad_options():
    module = captioner(decoder="beam", beam_size=2, max_output_length=5)
    outputs = module.caption(tf.constant(PNGS[:2]))
    assert outputs["attention"].shape[0] == 2 and outputs["attention"].shape[2:] == GRID
    for kwargs in ({"decoder": "sample"}, {"beam_size": 0}, {"max_output_length": 0}):
        with pytest.raises(ConfigError, match=f"Received: {next(iter(kwargs))}="):
            captioner(**kwargs)


def test_sample_images_are_a_png_pair_and_a_resized_jpeg():
    images = sample_images(SIZE)
    assert [image[:4] for image in images[:2]] == [b"\x89PNG"] * 2
    assert images[2][:2] == b"\xff\xd8"
    assert tf.io.decode_image(images[2]).shape == (SIZE + 16, SIZE + 16, 3)


def test_export_publishes_a_checked_version_and_the_check_sees_a_wrong_grid(tmp_path):
    module = captioner(max_output_length=4)
    version = export_captioner(module, tmp_path / "models", images=PNGS[:2])
    assert version == tmp_path / "models" / "1"
    report = check_captioner_saved_model(version, PNGS[:2], GRID)
    assert report["outputs"]["caption"]["attention"][2:] == list(GRID)
    with pytest.raises(ContractError, match=r"output 'attention' is .*expected DT_FLOAT"):
        check_captioner_saved_model(version, PNGS[:2], (2, 8))


# --- `keras-attn train`, `keras-attn export`, `keras-attn serve` -----------------------------


def train_run(out, attention="hard"):
    assert cli([
        "train", "--model", "show-attend-tell", "--attention", attention, "--corpus", "scenes-32",
        "--train-examples", "32", "--steps", "3", "--batch-size", "16", "--units", "16",
        "--embedding-dim", "8", "--eval-sentences", "4", "--checkpoint-every", "3",
        "--out", str(out), "--quiet",
    ]) == 0  # fmt: skip
    return out


def rest_predict(port: int, model_name: str, images: list[bytes]) -> list[dict]:
    body = {
        "signature_name": "caption",
        "instances": [{"b64": base64.b64encode(image).decode("ascii")} for image in images],
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/models/{model_name}:predict",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["predictions"]


def grpc_predict(target: str, model_name: str, images: list[bytes]) -> dict:
    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = "serving_default"
    request.inputs["image"].CopyFrom(tf.make_tensor_proto(images, tf.string, [len(images)]))
    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        return parse_response_outputs(stub.Predict(request, timeout=60))


def test_a_trained_run_exports_and_answers_png_over_grpc_and_rest(tmp_path):
    run = train_run(tmp_path / "run")
    metrics = json.loads((run / "metrics.json").read_text())
    assert {"dev_bleu", "dev_exact_match", "unseen_bleu", "unseen_exact_match"} <= set(metrics)
    assert RunDirectory(run).load_model().get_layer("decoder").attention == "hard"
    with pytest.raises(ConfigError, match="only apply to decoder='beam'"):
        export_run(run, tmp_path / "refused", beam_size=2)

    base = tmp_path / "models"
    assert cli(["export", str(run), "--model_base_path", str(base)]) == 0
    assert (base / "1" / "assets.extra" / "tf_serving_warmup_requests").exists()
    loaded = tf.saved_model.load(str(base / "1"))
    images = [*PNGS, sample_images(SIZE)[2]]  # three PNGs and a larger JPEG
    want = {k: v.numpy() for k, v in loaded.signatures["caption"](image=images).items()}
    width = want["tokens"].shape[1]
    assert want["attention"].shape == (len(images), width, *GRID)

    with ModelServer("captioner", str(base), port=0, rest_api_port=0) as server:
        served = grpc_predict(f"127.0.0.1:{server.port}", "captioner", images)
        predictions = rest_predict(server.rest_api_port, "captioner", images)
    assert list(served["caption"]) == [c.decode() for c in want["caption"]]
    np.testing.assert_allclose(served["attention"], want["attention"], atol=1e-6)
    np.testing.assert_allclose(served["scores"], want["scores"], atol=1e-6)
    assert len(predictions) == len(images)
    for row, prediction in enumerate(predictions):
        assert prediction["caption"] == want["caption"][row].decode()
        assert prediction["tokens"] == [t.decode() for t in want["tokens"][row]]
        np.testing.assert_allclose(prediction["attention"], want["attention"][row], atol=1e-6)
        np.testing.assert_allclose(prediction["scores"], want["scores"][row], atol=1e-6)
