"""The question answering task of `keras-attn train --model vqa-coattention`: vocabulary,
answers, batches, and one short trained run, which beats each question type's majority answer,
looks at the object a colour question names, and answers the same exported and served over
gRPC and REST."""

import base64
import json
import urllib.request

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import main as cli
from keras_attn.export.answerer import answerer_from_run
from keras_attn.formats import LABELS, VOCAB, RunDirectory
from keras_attn.models.families import get_family
from keras_attn.serving.client import parse_response_outputs
from keras_attn.serving.server import ModelServer
from keras_attn.training.config import TrainConfig
from keras_attn.training.tasks import get_task
from keras_attn.training.tasks.question_answering import (
    majority_answers,
    question_vocabulary,
    score_answers,
)
from keras_attn.vision import ANSWERS, QUESTION_TYPES, encode_png, question_splits

FAMILY = get_family("vqa-coattention")
TASK = get_task("question_answering")
# The short run: 3000 scenes of 32 pixels (about 11,500 questions), 1000 steps of 32. Over
# seeds 0 and 1 every type's accuracy is at least 0.08 above its majority answer's (shape
# questions the closest) and the colour questions' attention mass on the asked object over
# twice a uniform map's.
TRAIN = [
    "--model", "vqa-coattention", "--corpus", "scenes-32", "--train-examples", "3000",
    "--steps", "1000", "--batch-size", "32", "--eval-sentences", "800", "--seed", "0",
    "--checkpoint-every", "1000", "--quiet",
]  # fmt: skip
MARGIN = 0.05


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """`(run directory, metrics.json)` of the short run."""
    out = tmp_path_factory.mktemp("vqa") / "run"
    assert cli(["train", *TRAIN, "--out", str(out)]) == 0
    return RunDirectory(out), json.loads((out / "metrics.json").read_text())


def test_the_run_holds_the_question_words_and_the_answers(trained):
    run, _ = trained
    assert run.file(VOCAB).read_text(encoding="utf-8").splitlines() == question_vocabulary()
    assert run.file(LABELS).read_text(encoding="utf-8").splitlines() == list(ANSWERS)
    ids = run.tokenizer().tokenize(tf.constant(["what colour is the square?"])).to_list()[0]
    assert [question_vocabulary()[i] for i in ids] == ["what", "colour", "is", "the", "square", "?"]


def test_batches_are_images_questions_and_answer_ids(tmp_path):
    config = TrainConfig(
        model="vqa-coattention", corpus="scenes-32", train_examples=6, batch_size=4
    )
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    data = TASK.load_data(config, FAMILY)
    TASK.prepare_run(run, config, FAMILY, data, log=lambda line: None)
    plan = TASK.plan(run, config, FAMILY, data["train"])
    features, labels = plan._collate(np.arange(4), 0)
    assert features["images"].shape == (4, 32, 32, 3) and features["images"].dtype == np.uint8
    assert features["question_ids"].shape[0] == 4 and labels.shape == (4,)
    for row, question in enumerate(data["train"][:4]):
        assert ANSWERS[labels[row]] == question.answer
        np.testing.assert_array_equal(features["images"][row], question.scene.image)
        ids = [i for i in features["question_ids"][row] if i]
        text = " ".join(question_vocabulary()[i] for i in ids)
        assert text == question.question.replace("?", " ?")


def test_scores_count_by_type_against_the_majority_answer():
    questions = question_splits(seed=2, sizes={"train": 20}, image_size=32)["train"]
    truth = np.array([ANSWERS.index(q.answer) for q in questions])
    maps = np.zeros((len(questions), 4, 4), np.float32)
    maps[:, 0, 0] = 1.0
    majority = majority_answers(questions)
    scores = score_answers(questions, truth, maps, majority)
    assert scores["accuracy"] == 1.0
    assert all(scores[f"accuracy_{kind}"] == 1.0 for kind in QUESTION_TYPES)
    for kind in QUESTION_TYPES:
        answers = [q.answer for q in questions if q.type == kind]
        assert scores[f"majority_{kind}"] == answers.count(majority[kind]) / len(answers)
    colour = [q for q in questions if q.type == "colour"]
    from keras_attn.vision import asked_regions

    cells = [asked_regions(q, (4, 4)) for q in colour]
    assert scores["attention_on_object"] == pytest.approx(np.mean([c[0, 0] for c in cells]))
    assert scores["attention_uniform"] == pytest.approx(np.mean([c.mean() for c in cells]))


def test_the_short_run_beats_the_majority_answer_of_every_type(trained):
    _, metrics = trained
    for kind in QUESTION_TYPES:
        accuracy, majority = metrics[f"dev_accuracy_{kind}"], metrics[f"dev_majority_{kind}"]
        assert accuracy >= majority + MARGIN, (kind, accuracy, majority)
        assert metrics[f"dev_questions_{kind}"] >= 150
    assert metrics["dev_accuracy"] >= 0.55


def test_colour_questions_attend_to_the_asked_object(trained):
    _, metrics = trained
    # mean over the dev colour questions of the attention mass on the object's regions
    assert metrics["dev_attention_on_object"] >= 1.5 * metrics["dev_attention_uniform"]


def rest_predict(port: int, model_name: str, images: list[bytes], questions: list[str]) -> list:
    body = {
        "signature_name": "answer",
        "instances": [
            {"image": {"b64": base64.b64encode(image).decode("ascii")}, "question": question}
            for image, question in zip(images, questions, strict=True)
        ],
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/models/{model_name}:predict",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["predictions"]


def grpc_predict(target: str, model_name: str, images: list[bytes], questions: list[str]):
    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = "serving_default"
    request.inputs["image"].CopyFrom(tf.make_tensor_proto(images, tf.string, [len(images)]))
    request.inputs["question"].CopyFrom(
        tf.make_tensor_proto(questions, tf.string, [len(questions)])
    )
    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        return parse_response_outputs(stub.Predict(request, timeout=60))


def test_the_exported_run_answers_as_the_model_over_grpc_and_rest(trained, tmp_path):
    run, _ = trained
    dev = question_splits(seed=0, sizes={"dev": 3}, image_size=32)["dev"][:6]
    images = [encode_png(q.scene.image) for q in dev]
    questions = [q.question for q in dev]
    module = answerer_from_run(run.path)
    want = {k: v.numpy() for k, v in module.answer(images, questions).items()}
    # the exported graph is the model: its probabilities are the model's softmax
    ids = module.question_ids(tf.constant(questions)).numpy()
    pixels = np.stack([q.scene.image for q in dev])
    outputs = run.load_model()({"images": pixels, "question_ids": ids})
    np.testing.assert_allclose(want["scores"], tf.nn.softmax(outputs["logits"]), atol=1e-6)
    np.testing.assert_allclose(want["attention"], outputs["attention"], atol=1e-6)

    base = tmp_path / "models"
    assert cli(["export", str(run.path), "--model_base_path", str(base)]) == 0
    # `keras-attn serve`'s server, in this process (its command line is tests/serving's claim)
    with ModelServer("answerer", str(base), port=0, rest_api_port=0) as server:
        served = grpc_predict(f"127.0.0.1:{server.port}", "answerer", images, questions)
        predictions = rest_predict(server.rest_api_port, "answerer", images, questions)
    assert list(served["answer"]) == [a.decode() for a in want["answer"]]
    for key in ("scores", "attention", "question_attention"):
        np.testing.assert_allclose(served[key], want[key], atol=1e-6)
    assert len(predictions) == len(dev)
    for row, prediction in enumerate(predictions):
        assert prediction["answer"] == want["answer"][row].decode()
        assert prediction["tokens"] == [t.decode() for t in want["tokens"][row]]
        np.testing.assert_allclose(prediction["scores"], want["scores"][row], atol=1e-6)
        np.testing.assert_allclose(prediction["attention"], want["attention"][row], atol=1e-6)
