"""Shared, session-scoped corpus: generated once for all text tests."""

import pytest

from keras_attn.text import synthetic


@pytest.fixture(scope="session")
def splits():
    return synthetic.load_splits(seed=0)


@pytest.fixture(scope="session")
def pairs(splits):
    return splits["dev"] + splits["test"] + splits["train"]
