import collections

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.text.noising import (
    DEFAULT_NOISES,
    NOISES,
    check_noise_options,
    denoise,
    document_rotation,
    noise_dataset,
    sentence_permutation,
    text_infilling,
    token_deletion,
    token_masking,
)

MASK, END = 0, -1
DOC = tf.range(1, 401)  # unique ids 1..400, so every kept token can be traced back


def recovered_spans(noised, n):
    """Span lengths behind each mask of a text-infilled 1..n document (kept ids increase)."""
    values = list(noised)
    lengths = []
    for position, value in enumerate(values):
        if value != MASK:
            continue
        previous = max([v for v in values[:position] if v != MASK], default=0)
        following = min([v for v in values[position + 1 :] if v != MASK], default=n + 1)
        lengths.append(following - previous - 1)
    return lengths


@pytest.mark.parametrize(
    "transform, kwargs",
    [
        (token_masking, {"mask_id": MASK}),
        (token_deletion, {}),
        (text_infilling, {"mask_id": MASK}),
        (sentence_permutation, {"sentence_end_id": 7}),
        (document_rotation, {}),
    ],
)
def test_deterministic_given_the_seed(transform, kwargs):
    doc = tf.where(DOC % 7 == 0, 7, DOC + 10)  # distinct ids, every 7th a sentence end
    first = transform(doc, seed=[4, 5], **kwargs).numpy()
    again = transform(doc, seed=[4, 5], **kwargs).numpy()
    other = transform(doc, seed=[4, 6], **kwargs).numpy()
    np.testing.assert_array_equal(first, again)
    assert first.shape != other.shape or np.any(first != other)
    graph = tf.function(lambda ids: transform(ids, seed=[4, 5], **kwargs))
    np.testing.assert_array_equal(graph(doc).numpy(), first)


def test_token_masking_counts():
    noised = token_masking(DOC, MASK, rate=0.25, seed=[1, 1]).numpy()
    original = DOC.numpy()
    masked = noised == MASK
    assert noised.shape == original.shape
    np.testing.assert_array_equal(noised[~masked], original[~masked])
    # Binomial(400, 0.25): mean 100, sd 8.7; 4 sd either side.
    assert 65 <= masked.sum() <= 135
    np.testing.assert_array_equal(token_masking(DOC, MASK, rate=0.0).numpy(), original)
    assert np.all(token_masking(DOC, MASK, rate=1.0, seed=[2, 2]).numpy() == MASK)


def test_token_deletion_keeps_a_subsequence():
    noised = token_deletion(DOC, rate=0.25, seed=[1, 2]).numpy()
    assert np.all(np.diff(noised) > 0)  # order kept, nothing duplicated
    assert set(noised) <= set(DOC.numpy())
    assert 400 - 135 <= len(noised) <= 400 - 65  # Binomial(400, 0.25) deletions, 4 sd
    assert token_deletion(DOC, rate=1.0, seed=[0, 1]).shape == (0,)


def test_text_infilling_one_mask_per_span_and_masked_fraction():
    for seed in range(5):
        noised = text_infilling(DOC, MASK, rate=0.3, seed=[seed, 9]).numpy()
        kept = noised[noised != MASK]
        assert np.all(np.diff(kept) > 0)  # the kept tokens, in order
        spans = recovered_spans(noised, 400)
        assert len(spans) == (noised == MASK).sum()
        masked = 400 - len(kept)
        assert sum(spans) == masked
        assert masked >= 120  # round(0.3 * 400) at least; the last span may overshoot
        assert masked - max(spans) < 120  # ...but only the last one
        assert not np.any((noised[1:] == MASK) & (noised[:-1] == MASK))  # spans never touch


def test_text_infilling_span_lengths_are_poisson_3():
    lengths = []
    for seed in range(50):
        noised = text_infilling(DOC, MASK, rate=0.3, seed=[seed, 0]).numpy()
        lengths += recovered_spans(noised, 400)
    lengths = np.array(lengths)
    # ~40 spans per document, ~2000 in all. Poisson(3) has sd sqrt(3) = 1.73, so the mean's
    # standard error is ~0.04; the last span of each document is size-biased (mean 4 instead of
    # 3, ~+0.025 on the mean). |mean - 3| < 0.2 is 4 standard errors beyond that bias.
    assert len(lengths) > 1500
    assert abs(lengths.mean() - 3.0) < 0.2
    # P(0) = e^-3 = 0.050: 0-length spans are inserted masks. sd of the fraction ~0.005.
    assert 0.03 < np.mean(lengths == 0) < 0.07
    assert abs(lengths.var() - 3.0) < 0.5


def test_text_infilling_zero_length_span_inserts_a_mask():
    found = False
    for seed in range(40):
        noised = text_infilling(tf.range(1, 31), MASK, rate=0.3, seed=[seed, 3]).numpy()
        spans = recovered_spans(noised, 30)
        if 0 in spans:  # a mask between two consecutive ids: nothing was removed there
            found = True
            assert len(noised) == (noised != MASK).sum() + len(spans)
            assert (noised != MASK).sum() == 30 - sum(spans)
    assert found


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_text_infilling_tiny_documents(n):
    for seed in range(10):
        noised = text_infilling(tf.range(1, n + 1), MASK, rate=0.9, seed=[seed, 1]).numpy()
        spans = recovered_spans(noised, n)
        assert sum(spans) == n - (noised != MASK).sum()
        assert len(spans) == (noised == MASK).sum()


def test_sentence_permutation_shuffles_whole_sentences():
    rng = np.random.default_rng(0)
    doc = rng.integers(10, 20, size=60)
    doc[rng.choice(60, 8, replace=False)] = 7
    noised = sentence_permutation(tf.constant(doc), 7, seed=[3, 3]).numpy()

    def sentences(ids):
        result, current = [], []
        for token in ids:
            current.append(int(token))
            if token == 7:
                result.append(tuple(current))
                current = []
        return result + ([tuple(current)] if current else [])

    # The unterminated tail of the input may land mid-output and merge with the next sentence,
    # so compare the sentence multiset of the input with the output cut at the same boundaries.
    assert collections.Counter(noised.tolist()) == collections.Counter(doc.tolist())
    original = sentences(doc)
    order = []
    position = 0
    while position < len(noised):
        match = [s for s in original if tuple(noised[position : position + len(s)]) == s]
        assert match, "the output is not a concatenation of the input's sentences"
        order.append(match[0])
        position += len(match[0])
    assert collections.Counter(order) == collections.Counter(original)
    assert order != original  # seed [3, 3] changes the order of these 9 sentences


def test_sentence_permutation_edge_cases():
    assert sentence_permutation(tf.constant([], tf.int32), 7, seed=[0, 0]).shape == (0,)
    np.testing.assert_array_equal(sentence_permutation(tf.constant([5, 6]), 7).numpy(), [5, 6])


def test_document_rotation_is_a_rotation_with_uniform_start():
    starts = []
    doc = np.arange(1, 11)
    for seed in range(400):
        noised = document_rotation(tf.constant(doc), seed=[seed, 7]).numpy()
        start = int(noised[0]) - 1
        np.testing.assert_array_equal(noised, np.roll(doc, -start))
        starts.append(start)
    counts = np.bincount(starts, minlength=10)
    # 40 expected per start; chi-square with 9 dof, p = 0.001 critical value 27.9.
    assert ((counts - 40) ** 2 / 40).sum() < 27.9
    assert document_rotation(tf.constant([], tf.int32), seed=[0, 0]).shape == (0,)


def test_noise_dataset_seeds_every_element():
    docs = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([list(range(1, 41))] * 3))
    first = [d.numpy().tolist() for d in noise_dataset(docs, text_infilling, 5, mask_id=MASK)]
    again = [d.numpy().tolist() for d in noise_dataset(docs, text_infilling, 5, mask_id=MASK)]
    assert first == again
    assert first[0] != first[1]  # element seeds differ
    expected = text_infilling(tf.range(1, 41), MASK, seed=tf.constant([5, 1], tf.int64))
    assert first[1] == expected.numpy().tolist()


def test_rejects_bad_rates():
    with pytest.raises(ValueError, match="rate=1.5"):
        token_masking(DOC, MASK, rate=1.5)
    with pytest.raises(ValueError, match="poisson_lambda=-1"):
        text_infilling(DOC, MASK, poisson_lambda=-1)


SEP = 7
SENTENCES_DOC = tf.where(DOC % 7 == 0, SEP, DOC + 10)  # distinct ids, every 7th a sentence end
OPTIONS = {"mask_id": MASK, "sentence_end_id": SEP}


def test_denoise_applies_the_named_noises_in_the_fixed_order():
    # The reference: each function by hand, in NOISES order, each with its split of the seed;
    # mask_ratio is the rate of both token masking and text infilling.
    seeds = tf.random.experimental.stateless_split(tf.constant([3, 4], tf.int64), len(NOISES))
    expected = sentence_permutation(SENTENCES_DOC, SEP, seed=seeds[0])
    expected = document_rotation(expected, seed=seeds[1])
    expected = token_deletion(expected, rate=0.2, seed=seeds[2])
    expected = token_masking(expected, MASK, rate=0.25, seed=seeds[3])
    expected = text_infilling(expected, MASK, rate=0.25, poisson_lambda=2.0, seed=seeds[4])
    noised = denoise(
        SENTENCES_DOC,
        seed=[3, 4],
        noises=list(reversed(NOISES)),  # the order they are named in does not matter
        mask_ratio=0.25,
        poisson_lambda=2.0,
        deletion_ratio=0.2,
        **OPTIONS,
    )
    np.testing.assert_array_equal(noised.numpy(), expected.numpy())


def test_denoise_each_noise_keeps_its_seed_whatever_the_others():
    seeds = tf.random.experimental.stateless_split(tf.constant([3, 4], tf.int64), len(NOISES))
    for position, name in enumerate(NOISES):
        alone = denoise(SENTENCES_DOC, seed=[3, 4], noises=[name], **OPTIONS)
        if name == "sentence_permutation":
            expected = sentence_permutation(SENTENCES_DOC, SEP, seed=seeds[position])
        elif name == "document_rotation":
            expected = document_rotation(SENTENCES_DOC, seed=seeds[position])
        elif name == "token_deletion":
            expected = token_deletion(SENTENCES_DOC, rate=0.3, seed=seeds[position])
        elif name == "token_masking":
            expected = token_masking(SENTENCES_DOC, MASK, rate=0.3, seed=seeds[position])
        else:
            expected = text_infilling(SENTENCES_DOC, MASK, 0.3, 3.0, seed=seeds[position])
        np.testing.assert_array_equal(alone.numpy(), expected.numpy(), err_msg=name)


def test_denoise_defaults_are_infilling_after_permutation():
    assert DEFAULT_NOISES == ("text_infilling", "sentence_permutation")
    noised = denoise(SENTENCES_DOC, seed=[5, 6], **OPTIONS)
    explicit = denoise(
        SENTENCES_DOC,
        seed=[5, 6],
        noises=["sentence_permutation", "text_infilling"],
        mask_ratio=0.3,
        poisson_lambda=3.0,
        **OPTIONS,
    )
    np.testing.assert_array_equal(noised.numpy(), explicit.numpy())
    assert 0 < (noised.numpy() == MASK).sum() < 120  # infilled: one mask per span


def test_denoise_is_deterministic_and_identity_without_noise():
    first = denoise(SENTENCES_DOC, seed=[1, 2], **OPTIONS).numpy()
    # Python ints, int32 and int64 seeds draw alike.
    for seed in ([1, 2], tf.constant([1, 2], tf.int32), tf.constant([1, 2], tf.int64)):
        np.testing.assert_array_equal(denoise(SENTENCES_DOC, seed=seed, **OPTIONS).numpy(), first)
    graph = tf.function(lambda ids: denoise(ids, seed=[1, 2], **OPTIONS))
    np.testing.assert_array_equal(graph(SENTENCES_DOC).numpy(), first)
    other = denoise(SENTENCES_DOC, seed=[1, 3], **OPTIONS).numpy()
    assert first.shape != other.shape or np.any(first != other)
    unchanged = denoise(SENTENCES_DOC, seed=[1, 2], noises=(), **OPTIONS)
    np.testing.assert_array_equal(unchanged.numpy(), SENTENCES_DOC.numpy())


@pytest.mark.parametrize(
    "options, message",
    [
        ({"noises": ["text_infiling"]}, "text_infiling"),
        ({"noises": ["foo"]}, "sentence_permutation.*document_rotation.*token_deletion"),
        ({"noises": "text_infilling"}, "noises='text_infilling'"),
        ({"noises": ["token_masking", "token_masking"]}, "at most once"),
        ({"mask_ratio": 1.2}, "mask_ratio=1.2"),
        ({"deletion_ratio": -0.1}, "deletion_ratio=-0.1"),
        ({"poisson_lambda": -2.0}, "poisson_lambda=-2.0"),
    ],
)
def test_denoise_rejects_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        denoise(SENTENCES_DOC, seed=[0, 0], **OPTIONS, **options)
    defaults = {"noises": DEFAULT_NOISES, "mask_ratio": 0.3, "poisson_lambda": 3.0}
    with pytest.raises(ValueError, match=message):
        check_noise_options(**(defaults | {"deletion_ratio": 0.3} | options))
