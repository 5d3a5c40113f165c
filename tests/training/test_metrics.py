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


def smoothed_reference(labels, logits, eps, pad_id=0):
    """-Σ_k q_k log p_k, q = (1 - eps) onehot(y) + eps / V, averaged over non-padding rows."""
    logits = logits.astype("float64")
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    vocab = logits.shape[-1]
    rows = []
    for b, t in zip(*np.nonzero(labels != pad_id), strict=True):
        q = np.full(vocab, eps / vocab)
        q[labels[b, t]] += 1.0 - eps
        rows.append(-(q * log_probs[b, t]).sum())
    return np.mean(rows)


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_label_smoothing_matches_the_reference_and_ignores_padding(eps):
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(3, 4, 7)).astype("float32") * 3
    labels = np.array([[3, 1, 6, 0], [2, 0, 0, 0], [5, 5, 1, 4]])
    expected = smoothed_reference(labels, logits, eps)
    got = float(masked_cross_entropy(labels, logits, label_smoothing=eps))
    assert got == pytest.approx(expected, rel=1e-5)
    assert got != pytest.approx(float(masked_cross_entropy(labels, logits)), rel=1e-3)
    changed = logits.copy()
    changed[1, 1:] = rng.normal(size=(3, 7)) * 100  # padded rows: any values
    assert float(masked_cross_entropy(labels, changed, label_smoothing=eps)) == pytest.approx(
        expected, rel=1e-5
    )


def test_label_smoothing_zero_is_the_plain_loss_exactly():
    logits = np.random.default_rng(2).normal(size=(2, 5, 11)).astype("float32")
    labels = np.array([[1, 2, 3, 0, 0], [10, 9, 8, 7, 0]])
    plain = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    mask = tf.cast(labels != 0, tf.float32)
    before = tf.reduce_sum(plain * mask) / tf.reduce_sum(mask)  # the loss before smoothing existed
    assert float(masked_cross_entropy(labels, logits, label_smoothing=0.0)) == float(before)
    assert float(masked_cross_entropy(labels, logits)) == float(before)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_smoothed_loss_is_computed_in_float32_for_half_logits(dtype):
    logits = tf.cast(np.random.default_rng(3).normal(size=(2, 3, 300)) * 8, dtype)
    labels = np.array([[1, 2, 0], [299, 0, 0]])
    loss = masked_cross_entropy(labels, logits, label_smoothing=0.1)
    assert loss.dtype == tf.float32
    reference = smoothed_reference(labels, np.asarray(tf.cast(logits, tf.float32)), 0.1)
    assert float(loss) == pytest.approx(reference, rel=1e-5)
