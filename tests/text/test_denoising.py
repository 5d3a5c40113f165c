import collections

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.text.denoising import (
    MASK_TOKEN,
    SEP_TOKEN,
    BartTokens,
    bart_reserved_tokens,
    denoising_dataset,
    denoising_example,
    group_sentences,
    language_tag,
)
from keras_attn.text.noising import NOISES
from keras_attn.text.vocab import RESERVED_TOKENS

START, END, MASK, SEP, EN = 2, 3, 4, 5, 6
IDS = {"start_id": START, "end_id": END, "mask_id": MASK, "sentence_end_id": SEP}


def make_documents(count, sentences=10, seed=0):
    """Documents of distinct ids >= 10: every token can be traced back through the noise."""
    rng = np.random.default_rng(seed)
    documents = []
    for _ in range(count):
        lengths = rng.integers(5, 15, size=sentences)
        ids = np.arange(10, 10 + lengths.sum())
        documents.append([s.tolist() for s in np.split(ids, np.cumsum(lengths)[:-1])])
    return documents


def ended(document):
    return [token for sentence in document for token in [*sentence, SEP]]


def split_sentences(ids):
    result, current = [], []
    for token in ids:
        current.append(int(token))
        if token == SEP:
            result.append(tuple(current))
            current = []
    return result + ([tuple(current)] if current else [])


def dataset_of(documents):
    return tf.data.Dataset.from_tensor_slices(tf.ragged.constant(documents))


def test_language_tag():
    assert language_tag("es") == "[es]"
    assert language_tag("spa") == "[spa]"
    for code in ["ES", "e", "engl", "e1", "", 5]:
        with pytest.raises(ValueError, match="code="):
            language_tag(code)


def test_bart_reserved_tokens_layout():
    assert bart_reserved_tokens() == [*RESERVED_TOKENS, MASK_TOKEN, SEP_TOKEN]
    tokens = bart_reserved_tokens(["es", "en"])
    assert tokens[:4] == ["[PAD]", "[UNK]", "[START]", "[END]"]
    assert tokens.index("[MASK]") == 4
    assert tokens.index("[SEP]") == 5
    assert tokens[6:] == ["[es]", "[en]"]
    with pytest.raises(ValueError, match="languages=\\['es', 'es'\\]"):
        bart_reserved_tokens(["es", "es"])
    with pytest.raises(ValueError, match="languages='es'"):
        bart_reserved_tokens("es")
    with pytest.raises(ValueError, match="code='EN'"):
        bart_reserved_tokens(["EN"])


def test_bart_tokens_from_vocab():
    vocab = [*bart_reserved_tokens(["es", "en"]), "a", "[x]", "[abcd]", "##b"]
    tokens = BartTokens.from_vocab(vocab)
    assert (tokens.start_id, tokens.end_id, tokens.mask_id, tokens.sentence_end_id) == (2, 3, 4, 5)
    assert tokens.language_ids == {"es": 6, "en": 7}  # "[x]" and "[abcd]" are no codes
    with pytest.raises(ValueError, match="Missing: \\['\\[SEP\\]'\\]"):
        BartTokens.from_vocab([*RESERVED_TOKENS, MASK_TOKEN, "a"])


def test_target_is_the_document_and_source_its_noised_version():
    document = make_documents(1)[0]
    source, target = denoising_example(document, seed=(1, 2), max_length=512, **IDS)
    assert target.dtype == source.dtype == np.int32
    assert target.tolist() == [START, *ended(document), END]
    # Default noise: sentence permutation then text infilling. Every kept token is an original
    # one, each once; masks stand for the rest.
    kept = source[(source != MASK) & (source != SEP)]
    assert len(set(kept.tolist())) == len(kept)
    assert set(kept.tolist()) < set(ended(document))
    assert 0 < (source == MASK).sum()
    assert START not in source and END not in source


def test_sentence_permutation_keeps_the_multiset_of_sentences():
    orders = set()
    for index, document in enumerate(make_documents(20, seed=1)):
        source, target = denoising_example(
            document, seed=(0, index), max_length=512, noises=["sentence_permutation"], **IDS
        )
        sentences = split_sentences(source)
        original = split_sentences(target[1:-1])
        assert collections.Counter(sentences) == collections.Counter(original)
        assert all(sentence[-1] == SEP for sentence in sentences)
        orders.add(tuple(original.index(s) for s in sentences))
    assert len(orders) > 15  # 10! orders: 20 documents almost never repeat one


def test_masked_share_and_span_length_match_bart_defaults():
    documents = make_documents(300, seed=2)
    pairs = denoising_dataset(dataset_of(documents), seed=7, max_length=512, **IDS)
    masked, spans, lengths = [], [], []
    for source, target in pairs:
        source = source.numpy()
        n = len(target) - 2
        masked.append(n - np.sum(source != MASK))  # ids are distinct: the rest were masked
        spans.append(np.sum(source == MASK))  # one mask per span (spans never touch)
        lengths.append(n)
        assert not np.any((source[1:] == MASK) & (source[:-1] == MASK))
    masked, spans, lengths = map(np.array, (masked, spans, lengths))
    share = masked / lengths

    # NumPy reference of the process: Poisson(3) spans drawn until round(0.3 n) tokens are
    # taken, the total capped at n; 20 draws per document length.
    rng = np.random.default_rng(0)
    ref_masked, ref_spans, ref_lengths = [], [], []
    for n in np.repeat(lengths, 20):
        total = count = 0
        while total < round(0.3 * n):
            total += rng.poisson(3.0)
            count += 1
        ref_masked.append(min(total, n))
        ref_spans.append(count)
        ref_lengths.append(n)
    ref_share = np.array(ref_masked) / np.array(ref_lengths)

    # Share: sd per document ~0.015, so the mean of 300 has standard error ~0.0009; 0.004 is
    # over 4 standard errors. It exceeds 0.3 by the last span's overshoot (~1.4 tokens / ~100).
    assert abs(share.mean() - ref_share.mean()) < 0.004
    assert 0.3 <= share.mean() < 0.33
    # Mean span length: ~3,200 spans, Poisson sd 1.73, standard error ~0.03; 0.15 is 5 of them.
    mean_span = masked.sum() / spans.sum()
    assert abs(mean_span - np.sum(ref_masked) / np.sum(ref_spans)) < 0.15
    assert abs(mean_span - 3.0) < 0.2


def test_deterministic_per_seed_and_dataset_matches_examples():
    documents = make_documents(4, seed=3)
    first = [
        denoising_example(d, seed=(9, i), max_length=64, **IDS) for i, d in enumerate(documents)
    ]
    again = denoising_example(documents[0], seed=(9, 0), max_length=64, **IDS)
    np.testing.assert_array_equal(again[0], first[0][0])
    other = denoising_example(documents[0], seed=(9, 1), max_length=64, **IDS)
    assert other[0].tolist() != first[0][0].tolist()
    np.testing.assert_array_equal(other[1], first[0][1])  # the target does not depend on it

    dataset = denoising_dataset(dataset_of(documents), seed=9, max_length=64, **IDS)
    for _ in range(2):  # the same on every pass
        for (source, target), (expected_source, expected_target) in zip(
            dataset, first, strict=True
        ):
            np.testing.assert_array_equal(source.numpy(), expected_source)
            np.testing.assert_array_equal(target.numpy(), expected_target)


def test_language_tag_placement():
    document = make_documents(1, sentences=3, seed=4)[0]
    source, target = denoising_example(document, seed=(0, 0), max_length=512, language_id=EN, **IDS)
    assert source[-2:].tolist() == [END, EN]
    assert EN not in source[:-1] and END not in source[:-2]
    assert target.tolist() == [START, *ended(document), END]
    # mBART's own target starts with the tag: pass it as the start id.
    _, tagged = denoising_example(
        document, seed=(0, 0), max_length=512, language_id=EN, **(IDS | {"start_id": EN})
    )
    assert tagged.tolist() == [EN, *ended(document), END]
    plain, _ = denoising_example(document, seed=(0, 0), max_length=512, noises=(), **IDS)
    assert plain.tolist() == ended(document)  # BART: no special token around the source


@pytest.mark.parametrize("language_id", [None, EN])
def test_truncation_keeps_whole_sentences_within_max_length(language_id):
    documents = make_documents(20, seed=5)
    for index, document in enumerate(documents):
        for max_length in (8, 20, 45):
            source, target = denoising_example(
                document,
                seed=(index, max_length),
                max_length=max_length,
                language_id=language_id,
                noises=NOISES,  # every noise, infilling's inserted masks included
                **IDS,
            )
            assert len(source) <= max_length and len(target) <= max_length
            if language_id is not None:
                assert source[-2:].tolist() == [END, language_id]
            body = ended(document)
            kept = target[1:-1].tolist()
            assert target[-1] == END and kept[-1] == SEP
            if len(document[0]) + 1 <= max_length - 2:
                # The longest prefix of whole sentences that fits.
                assert kept == body[: len(kept)]
                assert (
                    len(kept) == len(body)
                    or len(kept) + len(document[len(split_sentences(kept))]) + 1 > max_length - 2
                )
            else:
                assert kept == [*document[0][: max_length - 3], SEP]


def test_truncation_of_a_single_long_sentence():
    long_sentence = [list(range(10, 30))]
    source, target = denoising_example(long_sentence, seed=(0, 0), max_length=6, noises=(), **IDS)
    assert target.tolist() == [START, 10, 11, 12, SEP, END]
    assert source.tolist() == [10, 11, 12, SEP]
    source, _ = denoising_example(
        long_sentence, seed=(0, 0), max_length=6, noises=(), language_id=EN, **IDS
    )
    assert source.tolist() == [10, 11, 12, SEP, END, EN]


def test_a_source_lengthened_by_the_noise_is_cut():
    # λ = 0: every span is empty, so infilling inserts a mask in every gap (2n + 1 tokens).
    options = {"noises": ["text_infilling"], "poisson_lambda": 0.0, "max_length": 6}
    source, target = denoising_example([[10, 11], [12]], seed=(0, 0), **options, **IDS)
    assert target.tolist() == [START, 10, 11, SEP, END]  # [12, SEP] does not fit
    assert source.tolist() == [MASK, 10, MASK, 11, MASK, SEP]  # 7 tokens cut to 6
    source, _ = denoising_example([[10, 11], [12]], seed=(0, 0), language_id=EN, **options, **IDS)
    assert source.tolist() == [MASK, 10, MASK, 11, END, EN]


def test_empty_sentences_and_dataset_dtype():
    source, target = denoising_example([[], [10]], seed=(0, 0), max_length=16, noises=(), **IDS)
    assert target.tolist() == [START, SEP, 10, SEP, END]
    documents = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[[10, 11]]], tf.int64))
    (pair,) = list(denoising_dataset(documents, seed=0, max_length=16, noises=(), **IDS))
    assert pair[0].dtype == pair[1].dtype == tf.int64
    assert pair[1].numpy().tolist() == [START, 10, 11, SEP, END]


def test_group_sentences_fills_documents_greedily():
    rng = np.random.default_rng(6)
    sentences = [list(range(10, 10 + n)) for n in rng.integers(0, 20, size=200)]
    max_length = 30
    documents = group_sentences(sentences, max_length=max_length)
    # Together, the non-empty sentences in order.
    assert [s for d in documents for s in d] == [s for s in sentences if s]
    sizes = [sum(len(s) + 1 for s in d) for d in documents]
    for document, size, following in zip(documents, sizes, documents[1:] + [None], strict=True):
        assert size <= max_length - 2 or len(document) == 1
        if following is not None:  # the next document's first sentence did not fit
            assert size + len(following[0]) + 1 > max_length - 2
        _, target = denoising_example(document, seed=(0, 0), max_length=max_length, **IDS)
        if size <= max_length - 2:  # kept whole
            assert target.tolist() == [START, *ended(document), END]
    assert group_sentences([list(range(10, 60))], max_length=8) == [[list(range(10, 60))]]
    with pytest.raises(ValueError, match="max_length=2"):
        group_sentences(sentences, max_length=2)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"max_length": 3}, "max_length=3"),
        ({"max_length": 10.0}, "max_length=10.0"),
        ({"max_length": True}, "max_length=True"),
        ({"noises": ["masking"]}, "text_infilling"),
        ({"mask_ratio": 1.5}, "mask_ratio=1.5"),
    ],
)
def test_rejects_bad_options(options, message):
    arguments = {"seed": (0, 0), "max_length": 16, **IDS} | options
    with pytest.raises(ValueError, match=message):
        denoising_example([[10, 11]], **arguments)
    arguments.pop("seed")
    with pytest.raises(ValueError, match=message):
        denoising_dataset(dataset_of([[[10, 11]]]), seed=0, **arguments)


def test_rejects_an_empty_document():
    with pytest.raises(ValueError, match="document_ids=\\[\\]"):
        denoising_example([], seed=(0, 0), max_length=16, **IDS)
