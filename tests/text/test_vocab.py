import collections
import re

import pytest

from keras_attn.text.normalization import normalize_text
from keras_attn.text.vocab import RESERVED_TOKENS, build_wordpiece_vocab, load_vocab, save_vocab


def test_reserved_tokens_and_their_order():
    assert RESERVED_TOKENS == ["[PAD]", "[UNK]", "[START]", "[END]"]


def test_corpus_vocab_keeps_words_whole_and_normalized(splits, vocabs):
    for side, vocab in enumerate(vocabs):
        assert vocab[:4] == RESERVED_TOKENS
        assert len(vocab) == len(set(vocab)) <= 2000
        assert all(token == token.lower() for token in vocab[4:])
        tokens = set(vocab)
        counts = collections.Counter(
            word
            for pair in splits["train"]
            for word in re.findall(r"\w+|[^\w\s]", normalize_text(pair[side]))
        )
        whole = sum(count for word, count in counts.items() if word in tokens)
        assert whole / sum(counts.values()) > 0.995
        # Every character seen is a token and a continuation token: no corpus word is [UNK].
        chars = {char for word in counts for char in word}
        assert chars <= tokens
        assert {"##" + char for char in chars} <= tokens
    spanish = set(vocabs[0])
    assert {"¿", "?", "está", "dónde", "el", "él"} <= spanish
    assert "El" not in spanish


def test_vocab_size_bounds_the_vocab():
    sentences = ["El gato negro duerme.", "La casa blanca es grande."] * 30
    small = build_wordpiece_vocab(sentences, vocab_size=60)
    assert len(small) <= 60
    # The alphabet (each character and its "##" form) is kept even when it does not fit.
    assert len(build_wordpiece_vocab(sentences, vocab_size=10)) > 10
    assert small[:4] == RESERVED_TOKENS
    with pytest.raises(ValueError, match="vocab_size"):
        build_wordpiece_vocab(sentences, vocab_size=4)
    with pytest.raises(ValueError, match="sentence"):
        build_wordpiece_vocab([])


def test_custom_reserved_tokens_come_first():
    vocab = build_wordpiece_vocab(["hola mundo"] * 20, 50, ["<pad>", "<unk>"])
    assert vocab[:2] == ["<pad>", "<unk>"]
    assert "hola" in vocab


def test_save_and_load_round_trip(tmp_path, vocabs):
    path = tmp_path / "vocab.txt"
    save_vocab(path, vocabs[0])
    assert load_vocab(path) == vocabs[0]
    text = path.read_bytes().decode("utf-8")
    assert text.endswith("\n") and text.count("\n") == len(vocabs[0])
    assert "dónde\n" in text


def test_save_rejects_tokens_that_do_not_fit_one_line(tmp_path):
    with pytest.raises(ValueError, match="one-line"):
        save_vocab(tmp_path / "v.txt", ["[PAD]", "a\nb"])
