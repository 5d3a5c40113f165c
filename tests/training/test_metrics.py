import numpy as np
import pytest
import tensorflow as tf

from keras_attn.training.metrics import (
    corpus_bleu,
    exact_match,
    masked_cross_entropy,
    masked_token_accuracy,
    rouge,
    rouge_tokens,
)


def test_bleu_and_exact_match():
    refs = ["the black cat sleeps.", "where is the dog?"]
    assert corpus_bleu(refs, refs) == pytest.approx(100.0)
    assert corpus_bleu(["a b c d", "e f g h"], refs) == pytest.approx(0.0)
    assert exact_match(["the black cat sleeps.", "where is a dog?"], refs) == 0.5
    with pytest.raises(ValueError):
        exact_match(["x"], refs)


def test_rouge_on_lins_example():
    """Lin (2004), section 3: against "police killed the gunman", "police kill the gunman" and
    "the gunman kill police" share one bigram each (ROUGE-2 1/3 both), but the first keeps the
    sentence order: ROUGE-L 3/4 against 2/4."""
    reference = "Police killed the gunman."
    for hypothesis, unigrams, rouge_l in [
        ("police kill the gunman", 3 / 4, 3 / 4),
        ("the gunman kill police", 3 / 4, 2 / 4),
    ]:
        scores = rouge([hypothesis], [reference])
        assert scores["rouge1"] == pytest.approx(100 * unigrams)
        assert scores["rouge2"] == pytest.approx(100 / 3)
        assert scores["rougeL"] == pytest.approx(100 * rouge_l)
    both = rouge(["police kill the gunman", "the gunman kill police"], [reference] * 2)
    assert both["rougeL"] == pytest.approx(100 * (3 / 4 + 2 / 4) / 2)  # the mean over pairs


def brute_force_rouge(hypothesis, reference):
    """F1s from the definitions, by enumeration: clipped n-gram matches, and the longest
    subsequence of the hypothesis that is also one of the reference."""
    import itertools
    from collections import Counter

    hyp, ref = rouge_tokens(hypothesis), rouge_tokens(reference)

    def f1(overlap, a, b):
        return 0.0 if overlap == 0 else 2 * overlap / (a + b)

    scores = {}
    for n in (1, 2):
        grams = [Counter(tuple(t[i : i + n]) for i in range(len(t) - n + 1)) for t in (hyp, ref)]
        overlap = sum(min(count, grams[1][g]) for g, count in grams[0].items())
        scores[f"rouge{n}"] = 100 * f1(overlap, sum(grams[0].values()), sum(grams[1].values()))

    def is_subsequence(part, whole):
        remaining = iter(whole)
        return all(token in remaining for token in part)

    lcs = max(
        (size for size in range(len(hyp) + 1) for part in itertools.combinations(hyp, size)
         if is_subsequence(part, ref)),
        default=0,
    )  # fmt: skip
    scores["rougeL"] = 100 * f1(lcs, len(hyp), len(ref))
    return scores


def test_rouge_equals_its_definition_on_random_summaries():
    rng = np.random.default_rng(3)
    words = ["el", "gato", "negro", "duerme", "sí", "a", "b"]
    for _ in range(40):
        hypothesis = " ".join(rng.choice(words, rng.integers(0, 8)))
        reference = " ".join(rng.choice(words, rng.integers(1, 8)))
        expected = brute_force_rouge(hypothesis, reference)
        got = rouge([hypothesis], [reference])
        for name in expected:
            assert got[name] == pytest.approx(expected[name]), (hypothesis, reference, name)


def test_rouge_tokens_and_bad_input():
    assert rouge_tokens("¿Dónde está el NIÑO? it's_2") == [
        "dónde",
        "está",
        "el",
        "niño",
        "it",
        "s",
        "2",
    ]
    assert rouge(["same words here"], ["Same words, here!"]) == pytest.approx(
        {"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0}
    )
    assert rouge([""], ["a b"]) == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    with pytest.raises(ValueError, match="2 hypotheses for 1 references"):
        rouge(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="at least one"):
        rouge([], [])


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
