"""Shared, session-scoped corpus and vocabularies: generated once for all text tests."""

import pytest

from keras_attn.text import synthetic
from keras_attn.text.vocab import build_wordpiece_vocab


@pytest.fixture(scope="session")
def splits():
    return synthetic.load_splits(seed=0)


@pytest.fixture(scope="session")
def pairs(splits):
    return splits["dev"] + splits["test"] + splits["train"]


@pytest.fixture(scope="session")
def vocabs(splits):
    """(spanish_vocab, english_vocab) learned on the train split."""
    train = splits["train"]
    return (
        build_wordpiece_vocab([es for es, _ in train]),
        build_wordpiece_vocab([en for _, en in train]),
    )
