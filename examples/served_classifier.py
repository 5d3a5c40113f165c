"""Your own Keras text classifier, served through TF Serving's Classification API.

    python examples/served_classifier.py [--out served_classifier] [--epochs 6]

1. Build a functional Keras classifier (embedding, masked mean, softmax) and fit it on a
   generated task: does a sentence name an animal, a thing or a place?
2. `keras_attn.export.classifier.export_classifier` — a SavedModel whose graph tokenizes the
   text (WordPiece, tf-text) and runs the model: a `classify` signature for TF Serving's
   Classify API (serialized tf.Examples with a `text` feature in, classes and scores out) and
   `predict`/`serving_default` (text in, label, classes and scores out), checked to load and
   run with only tensorflow + tensorflow_text.
3. Serve it with the server of `keras-attn serve` (the stock TensorFlow Serving APIs) and ask
   for the classes of a few sentences over gRPC (`PredictionService.Classify`) and REST
   (`POST /v1/models/classifier:classify`); the scores are the model's probabilities.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import urllib.request
from pathlib import Path

import keras
import numpy as np

LABELS = ["animal", "thing", "place"]
NOUNS = {
    "animal": "cat dog bird fish horse cow sheep goat".split(),
    "thing": "table chair book lamp door cup spoon window".split(),
    "place": "park city river beach forest market station garden".split(),
}
FILLERS = "the a big small red green old new near sees has likes".split()
# Token ids 0-3 are the reserved tokens every keras_attn vocabulary starts with.
VOCABULARY = ["[PAD]", "[UNK]", "[START]", "[END]", *FILLERS, *sum(NOUNS.values(), [])]
QUERIES = ["the big dog sees a cat", "an old lamp near the door", "a small river", ""]


def generate(count: int, seed: int) -> tuple[list[str], np.ndarray]:
    """`count` sentences of five fillers and one noun, each labelled with its noun's class."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(len(LABELS), size=count)
    texts = []
    for label in labels:
        words = list(rng.choice(FILLERS, size=5))
        words.insert(int(rng.integers(6)), str(rng.choice(NOUNS[LABELS[label]])))
        texts.append(" ".join(words))
    return texts, labels.astype("int32")


def build_model(vocabulary_size: int) -> keras.Model:
    """Token ids `(batch, T)`, 0 for padding → class probabilities `(batch, 3)`."""
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    embedded = keras.layers.Embedding(vocabulary_size, 16, mask_zero=True)(token_ids)
    pooled = keras.layers.GlobalAveragePooling1D()(embedded)  # the mean over real tokens
    probabilities = keras.layers.Dense(len(LABELS), activation="softmax")(pooled)
    return keras.Model(token_ids, probabilities, name="bag_of_words")


def classify_over_grpc(target: str, texts: list[str]) -> list[list[tuple[str, float]]]:
    """`PredictionService.Classify` on one tf.Example per text: `(label, score)` per class."""
    import grpc
    from tensorflow_serving.apis import classification_pb2, prediction_service_pb2_grpc

    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "classifier"
    request.model_spec.signature_name = "classify"
    for text in texts:
        example = request.input.example_list.examples.add()
        example.features.feature["text"].bytes_list.value.append(text.encode("utf-8"))
    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        response = stub.Classify(request, timeout=30)
    return [
        [(entry.label, entry.score) for entry in result.classes]
        for result in response.result.classifications
    ]


def classify_over_rest(port: int, texts: list[str]) -> list[list[tuple[str, float]]]:
    """`POST /v1/models/classifier:classify` with `{"examples": [{"text": ...}]}`."""
    body = {"signature_name": "classify", "examples": [{"text": text} for text in texts]}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/models/classifier:classify",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        results = json.loads(response.read())["results"]
    return [[(label, score) for label, score in result] for result in results]


def run(out: Path, epochs: int = 6, seed: int = 0, log=print) -> dict:
    """Train, export, serve and query; returns the test accuracy and the scores of `QUERIES`
    computed in this process and received over gRPC and REST."""
    import tensorflow as tf

    from keras_attn.export.classifier import export_classifier
    from keras_attn.serving.server import ModelServer
    from keras_attn.text.tokenizer import WordPieceTokenizer

    keras.utils.set_random_seed(seed)
    tokenizer = WordPieceTokenizer(VOCABULARY)

    def ids(texts: list[str]) -> np.ndarray:
        """[START] pieces [END], right-padded with 0: what the exported graph feeds the model."""
        pieces = tokenizer.tokenize(tf.constant(texts)).to_list()
        rows = [[tokenizer.start_id, *row, tokenizer.end_id] for row in pieces]
        return keras.utils.pad_sequences(rows, padding="post", dtype="int32")

    train_texts, train_labels = generate(600, seed)
    test_texts, test_labels = generate(200, seed + 1)
    model = build_model(len(VOCABULARY))
    model.compile(
        keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    model.fit(ids(train_texts), train_labels, batch_size=32, epochs=epochs, verbose=0)
    accuracy = float(model.evaluate(ids(test_texts), test_labels, verbose=0)[1])
    log(f"test accuracy of the Keras model: {accuracy:.1%}")

    base = out / "models" / "classifier"
    version = export_classifier(
        model,
        base,
        vocabulary=VOCABULARY,
        label_names=LABELS,
        first_token="[START]",
        last_token="[END]",
    )
    log(f"exported {version} (signatures classify, predict, serving_default)")
    in_process = np.asarray(model(ids(QUERIES)))  # the Keras model's probabilities

    with ModelServer("classifier", str(base), port=0, rest_api_port=0) as server:
        log(f"serving on 127.0.0.1:{server.port} (gRPC) and {server.rest_api_port} (REST)")
        over_grpc = classify_over_grpc(f"127.0.0.1:{server.port}", QUERIES)
        over_rest = classify_over_rest(server.rest_api_port, QUERIES)
    for text, classes in zip(QUERIES, over_grpc, strict=True):
        label, score = max(classes, key=lambda entry: entry[1])
        scores = ", ".join(f"{name} {value:.3f}" for name, value in classes)
        log(f"  {text!r:28} -> {label:6} ({scores})")
    return {
        "accuracy": accuracy,
        "in_process": in_process,
        "grpc": np.array([[score for _, score in classes] for classes in over_grpc]),
        "rest": np.array([[score for _, score in classes] for classes in over_rest]),
        "labels": [[name for name, _ in classes] for classes in over_grpc + over_rest],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="served_classifier", help="output directory (recreated)")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = Path(args.out)
    shutil.rmtree(out / "models", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    results = run(out, args.epochs, args.seed)
    same = np.allclose(results["grpc"], results["in_process"], atol=1e-6) and np.allclose(
        results["rest"], results["in_process"], atol=1e-6
    )
    print(f"served scores {'equal' if same else 'differ from'} the Keras model's probabilities")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
