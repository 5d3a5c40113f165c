"""ELMo in miniature: pretrain a biLM on the synthetic corpus, then mix its layers for a classifier.

    python examples/elmo_scalar_mix.py [--sentences 6000] [--labeled 600] [--units 64]
                                       [--lm-epochs 4] [--task-epochs 8]

1. Pretraining (unsupervised): `keras_attn.layers.BiLanguageModel` (2 LSTM layers per direction)
   learns to predict the next token (forward LM) and the previous one (backward LM) on the
   English side of the grammar-generated corpus (`keras_attn.text.synthetic`). Prints the dev
   perplexity of each direction.
2. Downstream (supervised, few labels): is a sentence real, or were two adjacent words swapped?
   Same corpus, held-out sentences, half of them corrupted. Word order is the whole signal, so the
   task needs context. The same small classifier (a GRU over per-token features, then a logistic
   output) is trained twice on the same labelled examples:
   - `plain`: features = a task-trained token embedding;
   - `elmo`:  features = [ScalarMix(biLM layers); the same task embedding], the biLM frozen and
     the mix weights `softmax(s)` and `gamma` learned with the classifier (Peters et al. 2018).
   Prints both test accuracies and the learned mix weights.

References:
    Peters et al., 2018, "Deep contextualized word representations", arXiv:1802.05365.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from keras_attn.layers import BiLanguageModel, ScalarMix
from keras_attn.text.synthetic import generate_pairs

PAD, UNK = 0, 1
_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(sentence: str) -> list[str]:
    """Lower-cased words and punctuation marks."""
    return _TOKEN.findall(sentence.lower())


def load_sentences(count: int, max_length: int, seed: int) -> list[list[str]]:
    """Tokenized English sentences of the synthetic corpus with at most `max_length` tokens."""
    pairs = generate_pairs(count * 2, seed=seed)
    sentences = [tokenize(english) for _, english in pairs]
    return [s for s in sentences if 3 <= len(s) <= max_length][:count]


def build_vocabulary(sentences: list[list[str]]) -> dict[str, int]:
    counts = collections.Counter(token for sentence in sentences for token in sentence)
    return {token: index + 2 for index, (token, _) in enumerate(counts.most_common())}


def encode(sentences: list[list[str]], vocabulary: dict[str, int], length: int) -> np.ndarray:
    """Right-padded id matrix `(len(sentences), length)`; 0 = padding, 1 = unknown."""
    ids = np.zeros((len(sentences), length), "int32")
    for row, sentence in enumerate(sentences):
        ids[row, : len(sentence)] = [vocabulary.get(token, UNK) for token in sentence]
    return ids


def swap_task(
    sentences: list[list[str]], rng: np.random.Generator
) -> tuple[list[list[str]], np.ndarray]:
    """Half the sentences get two adjacent, different tokens swapped (label 0); the rest are 1."""
    examples, labels = [], []
    for sentence in sentences:
        sentence = list(sentence)
        label = 1
        if rng.random() < 0.5:
            candidates = [i for i in range(len(sentence) - 1) if sentence[i] != sentence[i + 1]]
            i = int(rng.choice(candidates))
            sentence[i], sentence[i + 1] = sentence[i + 1], sentence[i]
            label = 0
        examples.append(sentence)
        labels.append(label)
    return examples, np.asarray(labels, "float32")


def pretrain(
    bilm: BiLanguageModel, train: np.ndarray, dev: np.ndarray, epochs: int, batch_size: int
) -> tuple[float, float]:
    """Train both LM directions; returns the dev perplexities `(forward, backward)`."""
    optimizer = keras.optimizers.Adam(3e-3, clipnorm=1.0)

    @tf.function
    def train_step(ids):
        with tf.GradientTape() as tape:
            _, forward, backward = bilm(ids, training=True)
            forward_loss, backward_loss = bilm.language_model_loss(ids, forward, backward)
            loss = forward_loss + backward_loss
        variables = bilm.trainable_variables
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    @tf.function
    def evaluate(ids):
        _, forward, backward = bilm(ids)
        return bilm.language_model_loss(ids, forward, backward)

    for epoch in range(epochs):
        order = np.random.default_rng(epoch).permutation(len(train))
        losses = [
            float(train_step(train[order[i : i + batch_size]]))
            for i in range(0, len(train), batch_size)
        ]
        print(f"  LM epoch {epoch + 1}: train loss (fwd + bwd) {np.mean(losses):.3f}", flush=True)
    forward_loss, backward_loss = evaluate(dev)
    return float(np.exp(forward_loss)), float(np.exp(backward_loss))


def build_classifier(
    vocabulary_size: int, length: int, units: int, bilm: BiLanguageModel | None
) -> keras.Model:
    """GRU classifier over per-token features: a task embedding, plus the ELMo mix if `bilm`."""
    ids = keras.Input((length,), dtype="int32", name="ids")
    embedding = keras.layers.Embedding(vocabulary_size, units, mask_zero=True, name="task_emb")
    features = embedding(ids)  # (batch, T, units)
    if bilm is not None:
        representations, _, _ = bilm(ids)  # (batch, T, L + 1, 2 * units), frozen
        elmo = ScalarMix(name="scalar_mix")(representations)  # (batch, T, 2 * units)
        features = keras.layers.Concatenate()([elmo, features])
    hidden = keras.layers.GRU(32, name="classifier_gru")(features)
    probability = keras.layers.Dense(1, activation="sigmoid", name="real")(hidden)
    model = keras.Model(ids, probability)
    model.compile(keras.optimizers.Adam(3e-3), "binary_crossentropy", metrics=["accuracy"])
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=6000, help="LM pretraining sentences")
    parser.add_argument("--labeled", type=int, default=600, help="labelled task examples")
    parser.add_argument("--test", type=int, default=1000, help="task test examples")
    parser.add_argument("--units", type=int, default=64, help="biLM embedding and state size")
    parser.add_argument("--max-length", type=int, default=20)
    parser.add_argument("--lm-epochs", type=int, default=4)
    parser.add_argument("--task-epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    keras.utils.set_random_seed(args.seed)
    started = time.perf_counter()

    # Unlabelled text for the LM; disjoint held-out sentences for the task.
    sentences = load_sentences(
        args.sentences + args.labeled + args.test + 200, args.max_length, args.seed
    )
    lm_sentences, dev_sentences = sentences[: args.sentences], sentences[-200:]
    task_sentences = sentences[args.sentences : args.sentences + args.labeled + args.test]
    vocabulary = build_vocabulary(lm_sentences)
    vocabulary_size = len(vocabulary) + 2
    length = args.max_length
    print(f"{len(lm_sentences)} LM sentences, vocabulary {vocabulary_size}, T = {length}")

    bilm = BiLanguageModel(vocabulary_size, args.units, num_layers=2, residual=True, dropout=0.1)
    forward_ppl, backward_ppl = pretrain(
        bilm,
        encode(lm_sentences, vocabulary, length),
        encode(dev_sentences, vocabulary, length),
        args.lm_epochs,
        args.batch_size,
    )
    print(f"biLM dev perplexity: forward {forward_ppl:.2f}, backward {backward_ppl:.2f}")
    bilm.trainable = False

    examples, labels = swap_task(task_sentences, np.random.default_rng(args.seed + 1))
    ids = encode(examples, vocabulary, length)
    train_ids, test_ids = ids[: args.labeled], ids[args.labeled :]
    train_labels, test_labels = labels[: args.labeled], labels[args.labeled :]

    accuracies = {}
    for name, features_from in (("plain embeddings", None), ("ELMo scalar mix", bilm)):
        keras.utils.set_random_seed(args.seed)
        classifier = build_classifier(vocabulary_size, length, args.units, features_from)
        classifier.fit(
            train_ids,
            train_labels,
            batch_size=32,
            epochs=args.task_epochs,
            verbose=0,
        )
        accuracies[name] = classifier.evaluate(test_ids, test_labels, verbose=0)[1]
        print(f"swap detection, test accuracy with {name}: {accuracies[name]:.3f}")
        if features_from is not None:
            mix = classifier.get_layer("scalar_mix")
            weights = ", ".join(f"{w:.3f}" for w in mix.mixing_weights().numpy())
            print(
                f"learned mix: softmax(s) = [{weights}] (embedding, layer 1, layer 2), "
                f"gamma = {float(mix.gamma.numpy()):.3f}"
            )
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
