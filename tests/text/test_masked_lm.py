import collections

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.text.masked_lm import (
    BERT_RESERVED_TOKENS,
    BertTokens,
    SentencePair,
    mask_tokens,
    masked_lm_dataset,
    next_sentence_pairs,
    pack_segments,
)
from keras_attn.text.vocab import build_wordpiece_vocab

CLS, SEP, MASK = 4, 5, 6
SPECIAL = tuple(range(7))  # [PAD] [UNK] [START] [END] [CLS] [SEP] [MASK]
VOCAB_SIZE = 1000
BERT = {"vocab_size": VOCAB_SIZE, "mask_id": MASK, "special_ids": SPECIAL}


def packed_batch(rows=512, length=128, seed=0):
    """`[CLS] A [SEP] B [SEP]` rows of ordinary ids (7..999), padded with 0 to `length`.

    Every row has at least 40 ordinary tokens, so a row with none chosen at rate 0.15 has
    probability 0.85^40 < 0.002 and the at-least-one rule barely moves the chosen share.
    """
    rng = np.random.default_rng(seed)
    ids = np.zeros((rows, length), np.int32)
    for row in range(rows):
        a, b = rng.integers(20, (length - 3) // 2, size=2)
        words = rng.integers(7, VOCAB_SIZE, size=a + b)
        tokens, _ = pack_segments(words[:a], words[a:], cls_id=CLS, sep_id=SEP, max_length=length)
        ids[row, : len(tokens)] = tokens
    return ids


def reference_mask_tokens(ids, choose, action, pick, rate, mask_fraction, random_fraction):
    """NumPy reference of `mask_tokens` given its three uniform draws (same shape as `ids`)."""
    replacements = np.setdiff1d(np.arange(VOCAB_SIZE), SPECIAL)
    maskable = ~np.isin(ids, SPECIAL)
    chosen = maskable & (choose < rate)
    for row in range(ids.shape[0]):
        if rate > 0 and maskable[row].any() and not chosen[row].any():
            chosen[row, np.argmin(np.where(maskable[row], choose[row], 2.0))] = True
    inputs = ids.copy()
    for r, t in zip(*np.nonzero(chosen), strict=True):
        if action[r, t] < mask_fraction:
            inputs[r, t] = MASK
        elif action[r, t] < mask_fraction + random_fraction:
            inputs[r, t] = replacements[pick[r, t]]
    return inputs, np.where(chosen, ids, 0)


def test_bert_vocabulary_layout():
    assert BERT_RESERVED_TOKENS == [
        "[PAD]",
        "[UNK]",
        "[START]",
        "[END]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    ]
    vocab = build_wordpiece_vocab(
        ["El gato negro come."] * 20, vocab_size=100, reserved_tokens=BERT_RESERVED_TOKENS
    )
    tokens = BertTokens.from_vocab(vocab)
    assert (tokens.pad_id, tokens.cls_id, tokens.sep_id, tokens.mask_id) == (0, 4, 5, 6)
    assert tokens.special_ids == SPECIAL
    assert tokens.vocab_size == len(vocab) > len(BERT_RESERVED_TOKENS)


def test_bert_tokens_fail_clearly_on_a_vocabulary_without_them():
    with pytest.raises(ValueError, match=r"Missing: \['\[CLS\]', '\[SEP\]', '\[MASK\]'\]"):
        BertTokens.from_vocab(["[PAD]", "[UNK]", "[START]", "[END]", "gato"])
    with pytest.raises(ValueError, match=r"'\[PAD\]' at id 0"):
        BertTokens.from_vocab(["[UNK]", "[PAD]", *BERT_RESERVED_TOKENS[2:], "gato"])


def test_mask_tokens_matches_the_numpy_reference():
    ids = packed_batch(rows=16, length=48, seed=1)
    ids[3, 1:] = 0  # a row with no maskable token: left alone
    ids[4, 2:] = 0  # a row with one maskable token: always chosen (at least one per row)
    seed = tf.constant([7, 8])
    choose_seed, action_seed, token_seed = tf.unstack(
        tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3)
    )
    choose = tf.random.stateless_uniform(ids.shape, choose_seed).numpy()
    action = tf.random.stateless_uniform(ids.shape, action_seed).numpy()
    pick = tf.random.stateless_uniform(
        ids.shape, token_seed, minval=0, maxval=VOCAB_SIZE - len(SPECIAL), dtype=tf.int32
    ).numpy()
    for rate, mask_fraction, random_fraction in [
        (0.15, 0.8, 0.1),
        (0.5, 0.3, 0.6),
        (0.0, 0.8, 0.1),
    ]:
        inputs, labels = mask_tokens(
            ids,
            seed=seed,
            rate=rate,
            mask_fraction=mask_fraction,
            random_fraction=random_fraction,
            **BERT,
        )
        expected_inputs, expected_labels = reference_mask_tokens(
            ids, choose, action, pick, rate, mask_fraction, random_fraction
        )
        np.testing.assert_array_equal(inputs.numpy(), expected_inputs)
        np.testing.assert_array_equal(labels.numpy(), expected_labels)
        assert labels.numpy()[3].sum() == 0
        assert (labels.numpy()[4] != 0).sum() == (rate > 0)


def test_mask_tokens_statistics():
    ids = packed_batch()
    inputs, labels = (t.numpy() for t in mask_tokens(ids, seed=[1, 2], **BERT))
    special = np.isin(ids, SPECIAL)

    # Special tokens and padding are never chosen nor changed.
    np.testing.assert_array_equal(inputs[special], ids[special])
    assert np.all(labels[special] == 0)
    # Labels are exactly the originals at the chosen positions, 0 elsewhere.
    chosen = labels != 0
    np.testing.assert_array_equal(labels[chosen], ids[chosen])
    np.testing.assert_array_equal(inputs[~chosen], ids[~chosen])

    # Chosen share ~ Binomial(N, 0.15), N ~ 40,000 maskable tokens: sd ~ 71; 5 sd either side.
    n = (~special).sum()
    assert abs(chosen.sum() - 0.15 * n) <= 5 * np.sqrt(n * 0.15 * 0.85)

    # Of the C chosen: 80 % [MASK], 10 % a random id, 10 % kept. A random draw equals the
    # original with probability 1/993, so it is counted as kept. Each share is a binomial
    # count; 5 sd either side.
    c = chosen.sum()
    r = 1 / (VOCAB_SIZE - len(SPECIAL))
    masked = (inputs == MASK) & chosen
    replaced = (inputs != MASK) & (inputs != ids) & chosen
    kept = (inputs == ids) & chosen
    for count, p in [(masked, 0.8), (replaced, 0.1 * (1 - r)), (kept, 0.1 + 0.1 * r)]:
        assert abs(count.sum() - p * c) <= 5 * np.sqrt(c * p * (1 - p)), (count.sum(), p * c)
    # Random replacements are ordinary ids, never special ones (nor padding).
    assert not np.isin(inputs[replaced], SPECIAL).any()
    assert inputs[replaced].min() >= 7 and inputs[replaced].max() < VOCAB_SIZE


def test_random_replacements_are_uniform_over_the_ordinary_ids():
    ids = np.random.default_rng(3).integers(7, 20, size=(64, 64)).astype(np.int32)
    inputs, _ = mask_tokens(
        ids,
        vocab_size=20,
        mask_id=MASK,
        special_ids=SPECIAL,
        seed=[3, 4],
        rate=1.0,
        mask_fraction=0.0,
        random_fraction=1.0,
    )
    counts = np.bincount(inputs.numpy().ravel(), minlength=20)
    assert counts[:7].sum() == 0
    # Chi-square with 12 degrees of freedom over the 13 ordinary ids: P(> 45) = 1e-5.
    expected = ids.size / 13
    assert np.sum((counts[7:] - expected) ** 2 / expected) < 45


def test_mask_tokens_is_a_function_of_ids_and_seed():
    ids = packed_batch(rows=8, length=64)
    first = [t.numpy() for t in mask_tokens(ids, seed=[5, 6], **BERT)]
    again = [t.numpy() for t in mask_tokens(ids, seed=[5, 6], **BERT)]
    other = [t.numpy() for t in mask_tokens(ids, seed=[5, 7], **BERT)]
    wide = mask_tokens(ids, seed=tf.constant([5, 6], tf.int64), **BERT)
    graph = tf.function(lambda x: mask_tokens(x, seed=[5, 6], **BERT))
    for a, b, c, d, e in zip(first, again, other, graph(tf.constant(ids)), wide, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, d.numpy())
        np.testing.assert_array_equal(a, e.numpy())  # the seed's dtype does not matter
        assert np.any(a != c)


def test_mask_tokens_on_one_sequence_keeps_its_shape_and_dtype():
    ids = tf.constant(packed_batch(rows=1, length=64)[0], tf.int64)
    inputs, labels = mask_tokens(ids, seed=[0, 0], **BERT)
    assert inputs.shape == labels.shape == ids.shape
    assert inputs.dtype == labels.dtype == tf.int64
    chosen = labels.numpy() != 0
    assert chosen.any()
    np.testing.assert_array_equal(labels.numpy()[chosen], ids.numpy()[chosen])


@pytest.mark.parametrize("shape", [(0,), (0, 0), (3, 0)])
def test_mask_tokens_on_empty_ids(shape):
    inputs, labels = mask_tokens(tf.zeros(shape, tf.int32), seed=[1, 2], **BERT)
    assert inputs.shape == labels.shape == shape


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rate": -0.1}, r"rate in \[0, 1\]. Received: rate=-0.1"),
        ({"rate": 1.5}, r"rate in \[0, 1\]. Received: rate=1.5"),
        ({"mask_fraction": 1.2}, r"mask_fraction in \[0, 1\]. Received: mask_fraction=1.2"),
        ({"random_fraction": -1}, r"random_fraction in \[0, 1\]"),
        ({"mask_fraction": 0.8, "random_fraction": 0.3}, r"mask_fraction \+ random_fraction <= 1"),
        ({"mask_id": VOCAB_SIZE}, r"mask_id in \[0, 1000\). Received: mask_id=1000"),
        ({"special_ids": (0, 1, VOCAB_SIZE)}, r"special_ids in \[0, 1000\)"),
        ({"vocab_size": 0, "mask_id": 0, "special_ids": ()}, r"vocab_size=0"),
        ({"vocab_size": 7}, r"at least one id outside special_ids"),
    ],
)
def test_mask_tokens_validates_its_arguments(kwargs, message):
    arguments = {**BERT, **kwargs}
    with pytest.raises(ValueError, match=message):
        mask_tokens(tf.constant([[7, 8]]), seed=[0, 0], **arguments)
    with pytest.raises(ValueError, match=message):
        masked_lm_dataset(tf.data.Dataset.range(1), 0, **arguments)


def test_mask_tokens_rejects_ids_of_rank_3():
    with pytest.raises(ValueError, match=r"rank 1 or 2. Received: ids.shape=\(1, 1, 2\)"):
        mask_tokens(tf.constant([[[7, 8]]]), seed=[0, 0], **BERT)


def test_masked_lm_dataset_seeds_element_i_with_seed_and_i():
    batches = packed_batch(rows=12, length=48).reshape(3, 4, 48)
    dataset = masked_lm_dataset(tf.data.Dataset.from_tensor_slices(batches), 11, **BERT)
    for _ in range(2):  # the same on every pass
        for i, (inputs, labels) in enumerate(dataset):
            expected_inputs, expected_labels = mask_tokens(batches[i], seed=[11, i], **BERT)
            np.testing.assert_array_equal(inputs.numpy(), expected_inputs.numpy())
            np.testing.assert_array_equal(labels.numpy(), expected_labels.numpy())


def test_masked_lm_dataset_on_packed_pairs_keeps_the_other_features():
    pairs = next_sentence_pairs(
        [[[7 + d, 10 + i] for i in range(5)] for d in range(3)], seed=0, ordered=True
    )
    packed = [pack_segments(a, b, cls_id=CLS, sep_id=SEP, max_length=16) for a, b, _ in pairs]

    def examples():
        for (token_ids, segment_ids), pair in zip(packed, pairs, strict=True):
            yield {"token_ids": token_ids, "segment_ids": segment_ids, "nsp_label": pair.is_next}

    signature = {
        "token_ids": tf.TensorSpec([None], tf.int32),
        "segment_ids": tf.TensorSpec([None], tf.int32),
        "nsp_label": tf.TensorSpec([], tf.int32),
    }
    dataset = tf.data.Dataset.from_generator(examples, output_signature=signature).padded_batch(4)
    features = list(masked_lm_dataset(dataset, 2, **BERT))
    assert len(features) == 3  # 12 pairs in batches of 4
    for i, element in enumerate(features):
        assert set(element) == {"token_ids", "segment_ids", "nsp_label", "mlm_labels"}
        original = np.zeros_like(element["token_ids"].numpy())
        for row, (token_ids, segment_ids) in enumerate(packed[4 * i : 4 * i + 4]):
            original[row, : len(token_ids)] = token_ids
            np.testing.assert_array_equal(
                element["segment_ids"].numpy()[row, : len(segment_ids)], segment_ids
            )
        np.testing.assert_array_equal(
            element["nsp_label"].numpy(), [p.is_next for p in pairs[4 * i : 4 * i + 4]]
        )
        inputs, labels = mask_tokens(original, seed=[2, i], **BERT)
        np.testing.assert_array_equal(element["token_ids"].numpy(), inputs.numpy())
        np.testing.assert_array_equal(element["mlm_labels"].numpy(), labels.numpy())


def reference_truncation(first, second, budget):
    """BERT's `_truncate_seq_pair`: pop from the longer list until the pair fits."""
    first, second = list(first), list(second)
    while len(first) + len(second) > budget:
        (first if len(first) > len(second) else second).pop()
    return first, second


@pytest.mark.parametrize(
    "first, second, max_length, token_ids, segment_ids",
    [
        ([7, 8], [9], 16, [CLS, 7, 8, SEP, 9, SEP], [0, 0, 0, 0, 1, 1]),
        ([7, 8], None, 16, [CLS, 7, 8, SEP], [0, 0, 0, 0]),
        ([7, 8], [], 16, [CLS, 7, 8, SEP], [0, 0, 0, 0]),
        ([7, 8, 9], None, 4, [CLS, 7, 8, SEP], [0, 0, 0, 0]),
        # Budget 6 for 6 + 6 tokens: the tie drops from B, then A, B, A, B, A.
        (
            [11, 12, 13, 14, 15, 16],
            [21, 22, 23, 24, 25, 26],
            9,
            [CLS, 11, 12, 13, SEP, 21, 22, 23, SEP],
            [0, 0, 0, 0, 0, 1, 1, 1, 1],
        ),
        # The short segment is left whole while the long one is cut to fit.
        (
            list(range(10, 20)),
            [30, 31],
            8,
            [CLS, 10, 11, 12, SEP, 30, 31, SEP],
            [0, 0, 0, 0, 0, 1, 1, 1],
        ),
        ([7, 8], [9, 10], 3, [CLS, SEP, SEP], [0, 0, 1]),
    ],
)
def test_pack_segments_hand_computed(first, second, max_length, token_ids, segment_ids):
    packed, segments = pack_segments(first, second, cls_id=CLS, sep_id=SEP, max_length=max_length)
    assert packed.dtype == segments.dtype == np.int32
    assert packed.tolist() == token_ids
    assert segments.tolist() == segment_ids


def test_pack_segments_truncates_longest_first_as_bert_does():
    rng = np.random.default_rng(0)
    for _ in range(200):
        first = rng.integers(7, 100, size=rng.integers(0, 30))
        second = rng.integers(7, 100, size=rng.integers(1, 30))
        max_length = int(rng.integers(3, 64))
        a, b = reference_truncation(first, second, max_length - 3)
        packed, segments = pack_segments(
            np.array(first), second, cls_id=CLS, sep_id=SEP, max_length=max_length
        )
        assert packed.tolist() == [CLS, *a, SEP, *b, SEP]
        assert segments.tolist() == [0] * (len(a) + 2) + [1] * (len(b) + 1)
        assert len(packed) <= max_length


def test_pack_segments_validates_its_arguments():
    with pytest.raises(ValueError, match=r"max_length >= 3 .*Received: max_length=2"):
        pack_segments([7], [8], cls_id=CLS, sep_id=SEP, max_length=2)
    with pytest.raises(ValueError, match=r"max_length >= 2 .*Received: max_length=1"):
        pack_segments([7], None, cls_id=CLS, sep_id=SEP, max_length=1)
    with pytest.raises(ValueError, match=r"1-D first segment. Received: shape=\(1, 2\)"):
        pack_segments([[7, 8]], None, cls_id=CLS, sep_id=SEP, max_length=8)


def corpus(lengths):
    """Documents of `(document, position)` sentences, so every pair can be traced back."""
    return [[(d, i) for i in range(n)] for d, n in enumerate(lengths)]


def test_next_sentence_pairs_positives_are_consecutive_and_balanced():
    documents = corpus([20] * 50)
    pairs = next_sentence_pairs(documents, seed=0)
    assert all(isinstance(pair, SentencePair) for pair in pairs)
    # One example per sentence with a successor, in document order.
    assert [pair.first for pair in pairs] == [(d, i) for d in range(50) for i in range(19)]
    for (d, i), second, is_next in pairs:
        if is_next == 1:
            assert second == (d, i + 1)
        else:
            assert is_next == 0 and second[0] != d
    # Positives ~ Binomial(950, 0.5): sd 15.4; 5 sd either side.
    positives = sum(pair.is_next for pair in pairs)
    assert abs(positives - 475) <= 5 * np.sqrt(950 * 0.25)


def test_next_sentence_pairs_random_seconds_are_uniform_over_the_other_documents():
    # Negatives of document 2 come from documents 0 (1 sentence), 1 (3) and 3 (12): shares
    # 1/16, 3/16, 12/16. Over 40 seeds, ~2,000 negatives: chi-square with 2 degrees of
    # freedom, P(> 23) = 1e-5.
    documents = corpus([1, 3, 100, 12])
    owners = collections.Counter(
        pair.second[0]
        for seed in range(40)
        for pair in next_sentence_pairs(documents, seed=seed)
        if pair.is_next == 0 and pair.first[0] == 2
    )
    assert set(owners) == {0, 1, 3}
    total = sum(owners.values())
    expected = {0: total / 16, 1: 3 * total / 16, 3: 12 * total / 16}
    assert sum((owners[d] - e) ** 2 / e for d, e in expected.items()) < 23


def test_next_sentence_pairs_is_a_function_of_the_seed():
    documents = corpus([6, 9, 4])
    first = next_sentence_pairs(documents, seed=3)
    assert next_sentence_pairs(documents, seed=3) == first
    assert next_sentence_pairs(documents, seed=4) != first


def test_next_sentence_pairs_take_any_sentence_type():
    documents = [[np.array([7, 8]), np.array([9])], [np.array([10, 11, 12])]]
    (pair,) = next_sentence_pairs(documents, seed=1)
    np.testing.assert_array_equal(pair.first, [7, 8])
    assert pair.second.tolist() == ([9] if pair.is_next else [10, 11, 12])


def test_next_sentence_pairs_unordered_gives_single_segments_without_nsp_label():
    documents = corpus([3, 1, 2])
    pairs = next_sentence_pairs(documents, seed=0, ordered=False)
    assert pairs == [SentencePair(s, None, -1) for document in documents for s in document]


def test_next_sentence_pairs_needs_another_document_for_random_seconds():
    with pytest.raises(ValueError, match=r"at least two documents.*Received: 2 document"):
        next_sentence_pairs([["a", "b"], []], seed=0)
    assert next_sentence_pairs([["a", "b"]], seed=0, ordered=False) == [
        SentencePair("a", None, -1),
        SentencePair("b", None, -1),
    ]
