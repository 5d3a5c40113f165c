import math

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.models import gpt
from keras_attn.training.evaluation import evaluate_pairs, evaluate_perplexity
from keras_attn.training.metrics import corpus_bleu, rouge


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_perplexity_is_exp_of_the_mean_next_token_nll():
    model = gpt(12, num_layers=1, d_model=8, num_heads=2, ff_dim=16, max_length=10)
    sequences = [
        np.array([2, 5, 6, 7, 3], np.int32),
        np.array([2, 9, 3], np.int32),
        np.array([2, 4, 4, 11, 8, 10, 3], np.int32),
    ]
    nll, count = 0.0, 0
    for ids in sequences:  # one unpadded sequence at a time, float64
        logits = np.asarray(model(ids[None, :-1]), np.float64)[0]
        nll -= log_softmax(logits)[np.arange(len(ids) - 1), ids[1:]].sum()
        count += len(ids) - 1
    # Batches of 2: padding (and the batch split) must not change the result.
    scores = evaluate_perplexity(model, sequences, batch_size=2)
    assert scores["tokens"] == count == 12 and scores["sentences"] == 3
    np.testing.assert_allclose(scores["cross_entropy"], nll / count, rtol=1e-5)
    np.testing.assert_allclose(scores["perplexity"], math.exp(nll / count), rtol=1e-5)


def test_no_sequences():
    with pytest.raises(ValueError, match="No sequences"):
        evaluate_perplexity(None, [])


def test_pairs_are_scored_on_the_translations_of_their_sources():
    class Reverser:
        """A stand-in translator: the source's words in reverse order."""

        def translate(self, batch):
            words = [b" ".join(reversed(text.split())) for text in batch.numpy()]
            return {"translation": tf.constant(words)}

    pairs = [("a b c", "C B A"), ("x y", "x y"), ("el gato", "gato el")]
    scores = evaluate_pairs(Reverser(), pairs, str.lower, batch_size=2)
    hypotheses, references = ["c b a", "y x", "gato el"], ["c b a", "x y", "gato el"]
    assert scores["hypotheses"] == hypotheses and scores["references"] == references
    assert scores["exact_match"] == pytest.approx(2 / 3)
    assert scores["bleu"] == pytest.approx(corpus_bleu(hypotheses, references))
    expected = rouge(hypotheses, references)
    assert {name: scores[name] for name in expected} == pytest.approx(expected)
    assert expected["rouge1"] == pytest.approx(100.0) and expected["rouge2"] < 100.0
