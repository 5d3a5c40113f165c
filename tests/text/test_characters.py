import numpy as np
import pytest

from keras_attn.text.characters import ZHANG_ALPHABET, encode_characters


def test_the_papers_alphabet_has_69_distinct_characters():
    # The paper says 70, counting its "-" twice.
    assert len(ZHANG_ALPHABET) == len(set(ZHANG_ALPHABET)) == 69
    assert "\n" in ZHANG_ALPHABET and " " not in ZHANG_ALPHABET


def test_ids_backward_cut_and_zero_outside_the_alphabet():
    ids = encode_characters(["Hello, wörld", "ab"], length=8)
    assert ids.shape == (2, 8) and ids.dtype == np.int32
    index = {c: i + 1 for i, c in enumerate(ZHANG_ALPHABET)}
    # First 8 characters "hello, w", written backward; the blank is 0.
    assert ids[0].tolist() == [index[c] if c != " " else 0 for c in "w ,olleh"]
    assert ids[1].tolist() == [index["b"], index["a"], 0, 0, 0, 0, 0, 0]
    forward = encode_characters(["ö!"], alphabet="!ö", length=3, reverse=False, lowercase=False)
    assert forward.tolist() == [[2, 1, 0]]


def test_repeated_characters_are_refused():
    with pytest.raises(ValueError, match="distinct"):
        encode_characters(["a"], alphabet="aa")
