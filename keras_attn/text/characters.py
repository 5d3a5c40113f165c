"""Character quantization for character-level CNNs (Zhang, Zhao & LeCun 2015)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["ZHANG_ALPHABET", "encode_characters"]

# The paper's alphabet: 26 letters, 10 digits, the other characters and the new line. The paper
# counts 70, but its list has "-" twice: 69 distinct characters.
ZHANG_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyz0123456789" + "-,;.!?:'\"/\\|_@#$%^&*~`+=<>()[]{}" + "\n"
)


def encode_characters(
    texts: Iterable[str],
    alphabet: str = ZHANG_ALPHABET,
    length: int = 1014,
    reverse: bool = True,
    lowercase: bool = True,
) -> np.ndarray:
    """Character ids `(len(texts), length)`: `alphabet[i]` is id `i + 1`, anything else 0.

    Id 0 is both padding and "not in the alphabet" (blank included): the paper quantizes such
    characters to all-zero vectors. Texts longer than `length` are cut to their first `length`
    characters. With `reverse=True` (the paper's order) the characters are written backward, so
    the last characters read sit at the start of the input, whatever the text's length.

    Args:
        texts: strings.
        alphabet: distinct characters; `len(alphabet)` is the model's `alphabet_size`.
        length: the input length `l0` (the paper's 1014).
        reverse: write each (cut) text backward.
        lowercase: lower-case first (the paper's alphabet has no capitals).

    Returns:
        int32 ids `(len(texts), length)`, right-padded with 0.

    Example:

    >>> encode_characters(["Ab c"], alphabet="abc", length=6, reverse=False).tolist()
    [[1, 2, 0, 3, 0, 0]]
    >>> encode_characters(["abc"], alphabet="abc", length=4).tolist()
    [[3, 2, 1, 0]]
    """
    if len(set(alphabet)) != len(alphabet):
        raise ValueError(f"Expected distinct characters in alphabet. Received: {alphabet!r}")
    index = {character: i + 1 for i, character in enumerate(alphabet)}
    texts = list(texts)
    ids = np.zeros((len(texts), length), "int32")
    for row, text in enumerate(texts):
        text = (text.lower() if lowercase else text)[:length]
        if reverse:
            text = text[::-1]
        ids[row, : len(text)] = [index.get(character, 0) for character in text]
    return ids
