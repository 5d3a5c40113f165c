"""WordPiece vocabularies: building one from sentences, and reading/writing vocab files."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset import (
    bert_vocab_from_dataset,
)

from keras_attn.text.normalization import normalize_strings

__all__ = ["RESERVED_TOKENS", "build_wordpiece_vocab", "load_vocab", "save_vocab"]

# Ids 0..3, in this order: padding, unknown, start and end of sequence.
RESERVED_TOKENS = ["[PAD]", "[UNK]", "[START]", "[END]"]

_BATCH = 1024


def build_wordpiece_vocab(
    sentences: Iterable[str],
    vocab_size: int = 2000,
    reserved_tokens: Sequence[str] = RESERVED_TOKENS,
) -> list[str]:
    """Learns a WordPiece vocabulary from sentences with tf-text's BERT vocabulary learner.

    Sentences get the tokenizer's own normalization (`normalize_strings`) first, then are split
    on whitespace and punctuation as `FastWordpieceTokenizer` splits them. Words seen fewer than
    10 times may be split into pieces; with a `vocab_size` above the number of distinct words
    every other word is a single piece. Every character seen becomes a token, and a `##`
    continuation token, so no corpus word maps to `[UNK]`.

    Args:
        sentences: raw sentences (any casing and spacing).
        vocab_size: maximum number of tokens, reserved tokens included. The alphabet is always
            kept, so a `vocab_size` below the number of reserved tokens, distinct characters
            and their `##` forms gives that many tokens instead.
        reserved_tokens: tokens placed first, in order (ids 0, 1, ...).

    Returns:
        The vocabulary: `reserved_tokens` first, then the learned tokens.

    Example:

    >>> vocab = build_wordpiece_vocab(["El gato negro."] * 20, vocab_size=100)
    >>> vocab[:4], "gato" in vocab, "." in vocab
    (['[PAD]', '[UNK]', '[START]', '[END]'], True, True)
    """
    sentences = tuple(sentences)
    if not sentences:
        raise ValueError("Expected at least one sentence to build a vocabulary from.")
    reserved = list(reserved_tokens)
    if vocab_size <= len(reserved):
        raise ValueError(
            f"Expected vocab_size > {len(reserved)} (the reserved tokens). "
            f"Received: vocab_size={vocab_size}"
        )
    return list(_learn(sentences, vocab_size, tuple(reserved)))


# Learning takes seconds on a corpus of tens of thousands of sentences: a process that trains
# several runs on the same text (a test session, an experiment) learns each vocabulary once.
@functools.lru_cache(maxsize=8)
def _learn(sentences: tuple[str, ...], vocab_size: int, reserved: tuple[str, ...]) -> tuple:
    reserved = list(reserved)
    dataset = (
        tf.data.Dataset.from_tensor_slices(tf.constant(sentences, tf.string))
        .batch(_BATCH)
        .map(normalize_strings)
    )
    vocab = bert_vocab_from_dataset(
        dataset,
        vocab_size=vocab_size,
        reserved_tokens=reserved,
        bert_tokenizer_params={"lower_case": False},
    )
    if vocab[: len(reserved)] != reserved:
        raise RuntimeError(f"Reserved tokens are not first in the learned vocabulary: {vocab[:8]}")
    return tuple(vocab)


def save_vocab(path: str | os.PathLike, vocab: Sequence[str]) -> None:
    """Writes a vocabulary as UTF-8 text, one token per line.

    Args:
        path: file to write (parent directories must exist).
        vocab: the tokens, in id order.

    Example:

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> save_vocab(path, ["[PAD]", "[UNK]", "[START]", "[END]", "gato"])
    >>> load_vocab(path)[-1]
    'gato'
    """
    for token in vocab:
        if not token or "\n" in token or "\r" in token:
            raise ValueError(f"Expected non-empty one-line tokens. Received: token={token!r}")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(token + "\n" for token in vocab))


def load_vocab(path: str | os.PathLike) -> list[str]:
    """Reads a vocabulary written by `save_vocab`.

    Args:
        path: the vocabulary file.

    Returns:
        The tokens, in id order.

    Example:

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> save_vocab(path, ["[PAD]", "[UNK]"])
    >>> load_vocab(path)
    ['[PAD]', '[UNK]']
    """
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]
