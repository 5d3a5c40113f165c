import numpy as np
import pytest
import tensorflow as tf

from keras_attn.training.metrics import (
    corpus_bleu,
    exact_match,
    masked_cross_entropy,
    masked_token_accuracy,
)


def test_bleu_and_exact_match():
    refs = ["the black cat sleeps.", "where is the dog?"]
    assert corpus_bleu(refs, refs) == pytest.approx(100.0)
    assert corpus_bleu(["a b c d", "e f g h"], refs) == pytest.approx(0.0)
    assert exact_match(["the black cat sleeps.", "where is a dog?"], refs) == 0.5
    with pytest.raises(ValueError):
        exact_match(["x"], refs)


def test_masked_cross_entropy_ignores_padding():
    logits = np.random.default_rng(0).normal(size=(2, 3, 5)).astype("float32")
    labels = np.array([[1, 2, 0], [4, 0, 0]])
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -np.mean([log_probs[0, 0, 1], log_probs[0, 1, 2], log_probs[1, 0, 4]])
    assert float(masked_cross_entropy(labels, logits)) == pytest.approx(expected, rel=1e-5)
    changed = logits.copy()
    changed[:, 2] += 100.0
    changed[1, 1] -= 50.0
    assert float(masked_cross_entropy(labels, changed)) == pytest.approx(expected, rel=1e-5)


def test_masked_accuracy():
    logits = tf.one_hot([[1, 2, 3], [4, 1, 1]], 5)
    labels = np.array([[1, 0, 0], [4, 2, 0]])
    assert float(masked_token_accuracy(labels, logits)) == pytest.approx(2 / 3)
