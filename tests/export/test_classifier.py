"""Served classifiers and taggers: text in, labels out, the same probabilities as the Keras model
on the same token ids; a user's functional classifier, a `text-cnn` and a `bert-tagger` run
exported, served by `keras-attn serve` and answered over gRPC and REST."""

import json
import shutil
import urllib.request

import grpc
import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    predict_pb2,
    prediction_log_pb2,
    prediction_service_pb2_grpc,
)
from tensorflow_serving.config import model_server_config_pb2

from keras_attn.errors import ConfigError
from keras_attn.export import classifier as classifier_module
from keras_attn.export.classifier import (
    Classifier,
    Tagger,
    classifier_from_run,
    export_classifier,
    export_classifier_run,
    set_signature_methods,
)
from keras_attn.export.contract import (
    ContractError,
    check_classifier_saved_model,
    serialized_text_examples,
)
from keras_attn.models.families import get_family
from keras_attn.serving.server import ModelServer
from keras_attn.training.tasks.classification import _Formatter
from keras_attn.training.trainer import RunDirectory, TrainConfig, train
from tests.export.conftest import RUN_LABELS, write_tiny_run

WORDS = "the a big small red cat dog bird fish table chair book lamp cup sees has near old".split()
VOCAB = ["[PAD]", "[UNK]", "[START]", "[END]", *WORDS]
LABELS = ["animal", "thing", "other"]
TEXTS = [
    "the big cat sees a dog",
    "a red lamp near the table",
    "",
    "old book has zebra",  # zebra is [UNK]
    "the cat sees the dog near the big red lamp and the small old cup",  # cut at max_length
]
MAX_LENGTH = 10


def reference_ids(texts, first=2, last=3, max_length=MAX_LENGTH):
    """Token ids as NumPy builds them: whole-word lookup, START/END, cut, right-padded."""
    rows = []
    wrap = [token for token in (first, last) if token is not None]
    for text in texts:
        pieces = [VOCAB.index(w) if w in VOCAB else 1 for w in text.split()]
        rows.append([*wrap[:1], *pieces[: max_length - len(wrap)], *wrap[1:]])
    ids = np.zeros((len(rows), max(map(len, rows))), "int64")
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    return ids


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def user_model(activation=None, dtype="int32", mask_input=False):
    """Embedding (id 0 masked) → masked mean → Dense: a functional classifier."""
    keras.utils.set_random_seed(7)
    token_ids = keras.Input((None,), dtype=dtype, name="token_ids")
    embedded = keras.layers.Embedding(len(VOCAB), 8, mask_zero=True)(token_ids)
    pooled = keras.layers.GlobalAveragePooling1D()(embedded)
    inputs = token_ids
    if mask_input:  # a second named input, scaled by the share of real tokens
        mask = keras.Input((None,), dtype="int32", name="padding_mask")
        share = keras.ops.mean(keras.ops.cast(mask, "float32"), axis=1, keepdims=True)
        pooled = keras.layers.Concatenate()([pooled, share])
        inputs = {"token_ids": token_ids, "padding_mask": mask}
    scores = keras.layers.Dense(len(LABELS), activation=activation)(pooled)
    return keras.Model(inputs, scores)


def classifier(model, **options):
    return Classifier(
        model,
        VOCAB,
        LABELS,
        first_token="[START]",
        last_token="[END]",
        max_length=MAX_LENGTH,
        **options,
    )


def numpy_outputs(outputs):
    return {key: np.asarray(value) for key, value in outputs.items()}


@pytest.mark.parametrize(
    "activation, dtype, kind",
    [(None, "int32", "logits"), ("softmax", "int32", "probabilities"), (None, "int64", "logits")],
)
def test_predict_and_classify_give_the_models_probabilities(activation, dtype, kind):
    model = user_model(activation, dtype)
    module = classifier(model)
    assert module.scores == kind
    expected = np.asarray(model(reference_ids(TEXTS).astype(dtype)))
    if kind == "logits":
        expected = softmax(expected)
    predicted = numpy_outputs(module.predict(tf.constant(TEXTS)))
    np.testing.assert_allclose(predicted["scores"], expected, rtol=1e-5, atol=1e-6)
    assert predicted["scores"].dtype == np.float32
    assert [label.decode() for label in predicted["label"]] == [
        LABELS[i] for i in expected.argmax(-1)
    ]
    assert predicted["classes"].tolist() == [[name.encode() for name in LABELS]] * len(TEXTS)
    classified = numpy_outputs(module.classify(tf.constant(serialized_text_examples(TEXTS))))
    assert sorted(classified) == ["classes", "scores"]
    np.testing.assert_array_equal(classified["scores"], predicted["scores"])
    np.testing.assert_array_equal(classified["classes"], predicted["classes"])


def test_sequential_and_subclassed_models_get_their_ids():
    keras.utils.set_random_seed(3)
    sequential = keras.Sequential([
        keras.Input((None,), dtype="int64"),
        keras.layers.Embedding(len(VOCAB), 4),
        keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(len(LABELS), activation="softmax"),
    ])  # fmt: skip

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.embedding = keras.layers.Embedding(len(VOCAB), 4)
            self.dense = keras.layers.Dense(len(LABELS))

        def call(self, ids):
            return self.dense(keras.ops.max(self.embedding(ids), axis=1))

    ids = reference_ids(TEXTS)
    for model, expected in ((sequential, "probabilities"), (Subclassed(), "logits")):
        module = classifier(model)
        assert module.scores == expected
        want = np.asarray(model(ids))
        want = softmax(want) if expected == "logits" else want
        got = module.predict(tf.constant(TEXTS))["scores"].numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_named_inputs_a_vocabulary_file_and_another_text_feature(tmp_path):
    model = user_model(mask_input=True)
    path = tmp_path / "vocab.txt"
    path.write_text("".join(f"{token}\n" for token in VOCAB))
    module = Classifier(model, path, LABELS, text_feature="sentence")
    ids = reference_ids(TEXTS[:2], first=None, last=None, max_length=99)
    expected = softmax(np.asarray(model({"token_ids": ids, "padding_mask": (ids != 0) * 1})))
    examples = serialized_text_examples(TEXTS[:2], "sentence")
    classified = numpy_outputs(module.classify(tf.constant(examples)))
    np.testing.assert_allclose(classified["scores"], expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError, match="sentence"):
        module.classify(tf.constant(serialized_text_examples(TEXTS[:1], "text")))


def test_mistakes_are_config_errors_naming_the_argument():
    model = user_model()
    cases = [
        (lambda: Classifier(model, VOCAB[1:] + ["x"], LABELS), "vocabulary", "reserved tokens"),
        (
            lambda: Classifier(model, VOCAB, LABELS[:2]),
            "label_names",
            r"label_names \(2\)\. Received outputs of shape \(3, 3\)",
        ),
        (lambda: Classifier(model, VOCAB, LABELS, scores="probabilities"), "scores", "sum to 1"),
        (lambda: Classifier(model, VOCAB, LABELS, first_token="[CLS]"), "first_token", "[CLS]"),
        (
            lambda: Classifier(
                model, VOCAB, LABELS, max_length=2, first_token="[START]", last_token="[END]"
            ),
            "max_length",
            "max_length > 2",
        ),
        (lambda: Tagger(model, VOCAB, LABELS), "tag_names", r"\(batch, T, num_tags\)"),
        (
            lambda: Classifier(model, [*VOCAB, "zebra", "lion"], LABELS),
            "vocabulary",
            r"fails on the ids of the vocabulary \(24 tokens\)",
        ),
        (lambda: export_classifier(model, "unused", vocabulary=VOCAB), "label_names", "must be"),
        (
            lambda: export_classifier(classifier(model), "unused", label_names=LABELS),
            "label_names",
            "has its own",
        ),
    ]
    for make, field, message in cases:
        with pytest.raises(ConfigError, match=message) as caught:
            make()
        assert field in caught.value.fields, caught.value
    ids = keras.Input((None,), dtype="int32", name="token_ids")
    other = keras.Input((None,), dtype="int32", name="language")
    two = keras.Model(
        {"token_ids": ids, "language": other},
        keras.layers.Dense(3)(keras.ops.cast(keras.ops.stack([ids, other], -1)[:, 0], "float32")),
    )
    with pytest.raises(ConfigError, match="'language' is neither") as caught:
        Classifier(two, VOCAB, LABELS)
    assert caught.value.fields == ("model", "token_input")


# --- run directories, export, contract, serving ----------------------------------------------


def tagged_file(path):
    rng = np.random.default_rng(1)
    lines = set()
    while len(lines) < 120:
        words = [
            str(rng.choice(WORDS)) if rng.random() < 0.7 else str(rng.integers(100, 10**5))
            for _ in range(int(rng.integers(3, 7)))
        ]
        tags = ["NUM" if w.isdigit() else "ANIMAL" if w in WORDS[5:9] else "O" for w in words]
        lines.add(f"{' '.join(words)}\t{' '.join(tags)}")
    path.write_text("".join(f"{line}\n" for line in sorted(lines)))
    return path


TINY = dict(
    steps=2,
    batch_size=16,
    vocab_size=60,
    max_length=MAX_LENGTH,
    eval_sentences=8,
    checkpoint_every=100,
    mixed_precision="float32",
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A `text-cnn` run as `keras-attn train` writes it, untrained (`write_tiny_run`: labelled
    `RUN_LABELS`), and a `bert-tagger` run trained two steps on `tagged_file`: its tag names and
    the WordPiece vocabulary learnt from the file (untrained weights would do)."""
    folder = tmp_path_factory.mktemp("classifier_runs")
    write_tiny_run(folder / "text-cnn", "text-cnn", max_length=MAX_LENGTH, embedding_dim=8)
    config = TrainConfig(
        model="bert-tagger",
        corpus=str(tagged_file(folder / "t.tsv")),
        options={"num_layers": 1, "d_model": 16, "num_heads": 2, "ff_dim": 32},
        **TINY,
    )
    train(folder / "bert-tagger", config, progress=False, log=lambda line: None)
    return {name: folder / name for name in ("text-cnn", "bert-tagger")}


def training_formatter(run):
    """The formatter `keras-attn train` turned the run's texts into model inputs with."""
    run = RunDirectory(run)
    config = run.read_config()
    return _Formatter(run, config, get_family(config.model))


RUN_TEXTS = ["the big cat sees a red dog", "", "a lamp 31337 near 12 old cups", " ".join(WORDS)]


def test_a_text_cnn_run_classifies_as_its_training_formats(runs):
    module = classifier_from_run(runs["text-cnn"])
    assert isinstance(module, Classifier) and module.label_names == list(RUN_LABELS)
    formatter = training_formatter(runs["text-cnn"])
    ids = formatter.sentences(RUN_TEXTS)
    assert len(ids[-1]) == MAX_LENGTH  # the long text is cut as in training
    padded = np.zeros((len(ids), max(map(len, ids))), "int32")
    for row, sentence in enumerate(ids):
        padded[row, : len(sentence)] = sentence
    expected = softmax(np.asarray(module.model(formatter.features(padded))))
    predicted = numpy_outputs(module.predict(tf.constant(RUN_TEXTS)))
    np.testing.assert_allclose(predicted["scores"], expected, rtol=1e-5, atol=1e-6)


def test_a_bert_tagger_run_tags_each_words_first_piece(runs):
    module = classifier_from_run(runs["bert-tagger"])
    assert isinstance(module, Tagger) and module.tag_names == ["ANIMAL", "NUM", "O"]
    assert module.first_id == module.tokenizer.vocab.index("[CLS]")
    formatter = training_formatter(runs["bert-tagger"])
    sentences = [(text.split(), [0] * len(text.split())) for text in RUN_TEXTS]
    outputs = numpy_outputs(module.tag(tf.constant(RUN_TEXTS)))
    assert outputs["tokens"].shape == outputs["tags"].shape == outputs["scores"].shape
    cut = 0
    for row, (ids, labels) in enumerate(formatter.tagged(sentences)):
        ids = ids[None]
        probabilities = softmax(np.asarray(module.model(formatter.features(ids))))[0]
        first_pieces = np.flatnonzero(labels)  # the words the training scores
        words = sentences[row][0]
        assert [t.decode() for t in outputs["tokens"][row, : len(words)]] == words
        expected_tags = [module.tag_names[i] for i in probabilities[first_pieces].argmax(-1)]
        tags = [t.decode() for t in outputs["tags"][row, : len(words)]]
        assert tags[: len(first_pieces)] == expected_tags
        assert tags[len(first_pieces) :] == [""] * (len(words) - len(first_pieces))
        np.testing.assert_allclose(
            outputs["scores"][row, : len(first_pieces)],
            probabilities[first_pieces].max(-1),
            rtol=1e-5,
        )
        cut += len(words) - len(first_pieces)
    assert cut > 0  # the long text's last words are past max_length


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory):
    """Base paths of the exported user classifier, text-cnn and bert-tagger runs (the contract
    check runs on the runs' exports; on the user's in the check test)."""
    base = tmp_path_factory.mktemp("served")
    export_classifier(classifier(user_model()), base / "user", check=False)
    export_classifier_run(runs["text-cnn"], base / "text_cnn")
    export_classifier_run(runs["bert-tagger"], base / "tagger")
    return base


def read_warmup(version):
    logs = []
    path = version / "assets.extra" / "tf_serving_warmup_requests"
    for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        logs.append(prediction_log_pb2.PredictionLog.FromString(record))
    return logs


def test_export_writes_the_classify_method_and_warmup_requests(exports):
    version = exports / "user" / "1"
    proto = saved_model_pb2.SavedModel.FromString((version / "saved_model.pb").read_bytes())
    signatures = proto.meta_graphs[0].signature_def
    methods = {key: s.method_name for key, s in signatures.items() if not key.startswith("__")}
    predict = "tensorflow/serving/predict"
    assert methods == {
        "classify": "tensorflow/serving/classify",
        "predict": predict,
        "serving_default": predict,
    }
    logs = read_warmup(version)
    assert [log.WhichOneof("log_type") for log in logs] == ["predict_log"] * 2 + ["classify_log"]
    examples = logs[2].classify_log.request.input.example_list.examples
    assert logs[2].classify_log.request.model_spec.signature_name == "classify"
    assert examples[0].features.feature["text"].bytes_list.value == [b"Ein kleiner Test."]
    assert [log.WhichOneof("log_type") for log in read_warmup(exports / "tagger" / "1")] == [
        "predict_log"
    ] * 2


def test_the_contract_check_reports_a_broken_classifier(exports, tmp_path, monkeypatch):
    broken = tmp_path / "broken"
    shutil.copytree(exports / "user" / "1", broken)
    set_signature_methods(broken, {"classify": "tensorflow/serving/predict"})
    with pytest.raises(ContractError) as caught:
        check_classifier_saved_model(broken, ["animal", "thing"], ["a cat", ""])
    message = str(caught.value)
    expected = "expected 'tensorflow/serving/classify'"
    assert f"classify: method 'tensorflow/serving/predict', {expected}" in message
    assert "classify: output 'classes' is" in message and "expected DT_STRING [-1, 2]" in message

    # An export whose check fails publishes nothing.
    def failing(path, *args):
        raise ContractError(f"{path}: scores are not probabilities")

    monkeypatch.setattr(classifier_module, "check_classifier_saved_model", failing)
    with pytest.raises(ContractError, match="not probabilities"):
        export_classifier(user_model(), tmp_path / "models", vocabulary=VOCAB, label_names=LABELS)
    assert not (tmp_path / "models").exists()


def model_config(base):
    config = model_server_config_pb2.ModelServerConfig()
    for name in ("user", "text_cnn", "tagger"):
        config.model_config_list.config.add(
            name=name, base_path=str(base / name), model_platform="tensorflow"
        )
    return config


def rest(port, path, body):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/models/{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def classification_request(name, texts):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = "classify"
    for example in serialized_text_examples(texts):
        request.input.example_list.examples.add().ParseFromString(example)
    return request


def test_served_classify_and_predict_equal_the_exported_graph(exports):
    local = {name: tf.saved_model.load(str(exports / name / "1")) for name in ("user", "text_cnn")}
    tagger = tf.saved_model.load(str(exports / "tagger" / "1"))
    with (
        ModelServer(
            model_config=model_config(exports),
            port=0,
            rest_api_port=0,
            enable_signature_method_name_check=True,
        ) as server,
        grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        for name, loaded in local.items():
            texts = RUN_TEXTS if name == "text_cnn" else TEXTS
            want = loaded.signatures["classify"](
                inputs=tf.constant(serialized_text_examples(texts))
            )
            names = [n.decode() for n in want["classes"].numpy()[0]]
            scores = want["scores"].numpy()
            response = stub.Classify(classification_request(name, texts), timeout=60)
            for row, result in enumerate(response.result.classifications):
                assert [c.label for c in result.classes] == names
                served = [c.score for c in result.classes]
                np.testing.assert_allclose(served, scores[row], atol=1e-6)
            body = {"signature_name": "classify", "examples": [{"text": t} for t in texts]}
            results = rest(server.rest_api_port, f"{name}:classify", body)["results"]
            for row, result in enumerate(results):
                assert [label for label, _ in result] == names
                np.testing.assert_allclose([s for _, s in result], scores[row], atol=1e-6)
            predictions = rest(server.rest_api_port, f"{name}:predict", {"instances": texts})
            labels = loaded.signatures["predict"](text=tf.constant(texts))["label"].numpy()
            assert [p["label"] for p in predictions["predictions"]] == [
                label.decode() for label in labels
            ]

        request = predict_pb2.PredictRequest()
        request.model_spec.name = "tagger"
        request.inputs["text"].CopyFrom(tf.make_tensor_proto(RUN_TEXTS, tf.string))
        response = stub.Predict(request, timeout=60)
        want = tagger.signatures["tag"](text=tf.constant(RUN_TEXTS))
        for key in ("tokens", "tags"):
            np.testing.assert_array_equal(tf.make_ndarray(response.outputs[key]), want[key])
        np.testing.assert_allclose(tf.make_ndarray(response.outputs["scores"]), want["scores"])
