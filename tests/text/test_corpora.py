import pytest

from keras_attn.text.corpora import load_corpus


def test_synthetic_corpus_is_the_generated_splits(splits):
    corpus = load_corpus("synthetic")
    assert corpus == splits
    assert sorted(corpus) == ["dev", "test", "train"]


def test_unknown_corpus_is_one_clear_error():
    with pytest.raises(ValueError) as info:
        load_corpus("foo")
    assert str(info.value) == "Unknown corpus 'foo'. Expected one of: synthetic"
