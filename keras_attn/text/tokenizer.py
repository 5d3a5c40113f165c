"""In-graph WordPiece tokenization for the served translator.

`WordPieceTokenizer` wraps `tensorflow_text.FastWordpieceTokenizer`, which keeps its whole model in
one constant tensor: no lookup tables or assets, so a `tf.function` that calls it saves to a
SavedModel that loads in a process importing only `tensorflow` and `tensorflow_text`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attn.text.normalization import (
    clean_punctuation_spacing,
    normalize_strings,
    normalize_text,
)
from keras_attn.text.vocab import RESERVED_TOKENS, load_vocab

__all__ = ["WordPieceTokenizer", "normalize_text"]


class WordPieceTokenizer(tf.Module):
    """Text ↔ WordPiece ids, inside the graph.

    `tokenize` normalizes (`normalize_strings`: case folding, NFKC, whitespace), splits on
    whitespace and punctuation and maps each word to its longest-match-first WordPiece ids;
    unknown words become `[UNK]`. `detokenize` inverts it up to normalization: for a corpus
    sentence `s`, `detokenize(tokenize(s)) == normalize_text(s)`.

    The vocabulary starts with the reserved tokens `[PAD]`, `[UNK]`, `[START]`, `[END]` (ids 0–3);
    `tokenize` never adds `[START]`/`[END]`.

    Args:
        vocab: the tokens in id order, e.g. from `build_wordpiece_vocab`; continuation pieces
            start with `##`.
        name: module name.

    Example:

    >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "¿", "?", "dónde", "está", "el", "gato"]
    >>> tokenizer = WordPieceTokenizer(vocab)
    >>> tokenizer.tokenize(tf.constant(["¿Dónde está el perro?"])).to_list()
    [[4, 6, 7, 8, 1, 5]]
    >>> tokenizer.detokenize(tf.constant([[2, 4, 6, 7, 8, 9, 5, 3, 0]])).numpy()[0].decode()
    '¿dónde está el gato?'
    """

    def __init__(self, vocab: Sequence[str], name: str | None = None) -> None:
        super().__init__(name=name)
        vocab = [str(token) for token in vocab]
        if vocab[: len(RESERVED_TOKENS)] != RESERVED_TOKENS:
            raise ValueError(
                f"Expected the vocabulary to start with {RESERVED_TOKENS}. "
                f"Received: {vocab[: len(RESERVED_TOKENS)]}"
            )
        if len(set(vocab)) != len(vocab):
            raise ValueError("Expected distinct tokens in the vocabulary.")
        self._vocab_tokens = tuple(vocab)
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=vocab,
            suffix_indicator="##",
            unknown_token=RESERVED_TOKENS[1],
            token_out_type=tf.int64,
            support_detokenization=True,
        )
        # What `id_to_token` shows: every token as is, except padding as "".
        self._display_tokens = tf.constant([""] + vocab[1:], tf.string)

    @classmethod
    def from_file(cls, path: str | os.PathLike, name: str | None = None) -> WordPieceTokenizer:
        """Builds a tokenizer from a vocabulary file written by `save_vocab`.

        Args:
            path: the vocabulary file, one token per line.
            name: module name.

        Returns:
            A `WordPieceTokenizer`.

        Example:

        >>> import tempfile, os
        >>> from keras_attn.text.vocab import save_vocab
        >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        >>> save_vocab(path, ["[PAD]", "[UNK]", "[START]", "[END]", "gato"])
        >>> WordPieceTokenizer.from_file(path).vocab_size
        5
        """
        return cls(load_vocab(path), name=name)

    @property
    def vocab(self) -> list[str]:
        """The tokens in id order."""
        return list(self._vocab_tokens)

    @property
    def vocab_size(self) -> int:
        """Number of tokens, reserved tokens included."""
        return len(self._vocab_tokens)

    @property
    def pad_id(self) -> int:
        """Id of `[PAD]` (0)."""
        return 0

    @property
    def unk_id(self) -> int:
        """Id of `[UNK]` (1)."""
        return 1

    @property
    def start_id(self) -> int:
        """Id of `[START]` (2)."""
        return 2

    @property
    def end_id(self) -> int:
        """Id of `[END]` (3)."""
        return 3

    def normalize(self, strings: tf.Tensor) -> tf.Tensor:
        """Normalizes strings in the graph; see `normalize_strings`.

        Args:
            strings: string tensor of any shape.

        Returns:
            A string tensor of the same shape.
        """
        return normalize_strings(strings)

    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """Normalizes and tokenizes a batch of sentences.

        Args:
            strings: string tensor `(batch,)`.

        Returns:
            int64 `RaggedTensor` `(batch, None)` of token ids, without `[START]`/`[END]`.
        """
        strings = tf.convert_to_tensor(strings, tf.string)
        return self._wordpiece.tokenize(normalize_strings(strings))

    def detokenize(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """Turns ids back into normalized text.

        Each row is cut at its first `[END]`; `[PAD]` and `[START]` are dropped; `##` pieces
        are merged into their word; no space is left before `.,!?;:` or after `¿¡`.

        Args:
            ids: int32/int64 `(batch, T)` tensor or `(batch, None)` ragged tensor.

        Returns:
            string tensor `(batch,)`.
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=self.pad_id)
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int64)  # (batch, T)
        ended = tf.cumsum(tf.cast(tf.equal(ids, self.end_id), tf.int32), axis=1) > 0
        keep = ~ended & tf.not_equal(ids, self.pad_id) & tf.not_equal(ids, self.start_id)
        words = self._wordpiece.detokenize(tf.ragged.boolean_mask(ids, keep))  # (batch,)
        return clean_punctuation_spacing(words)

    def id_to_token(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        """Maps ids to their WordPiece strings (`[PAD]` → "", out-of-range ids → `[UNK]`).

        Args:
            ids: int `(batch, T)` tensor (or ragged tensor).

        Returns:
            string tensor (or ragged tensor) of the same shape.
        """
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self.id_to_token(ids.flat_values))
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int64)
        in_range = (ids >= 0) & (ids < self.vocab_size)
        ids = tf.where(in_range, ids, tf.constant(self.unk_id, tf.int64))
        return tf.gather(self._display_tokens, ids)
