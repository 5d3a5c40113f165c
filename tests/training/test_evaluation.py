import math

import numpy as np
import pytest

from keras_attn.models import gpt
from keras_attn.training.evaluation import evaluate_perplexity


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
