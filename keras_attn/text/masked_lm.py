"""BERT's pre-training data: masked-LM corruption, `[CLS] A [SEP] B [SEP]` packing, NSP pairs.

- `BERT_RESERVED_TOKENS` and `BertTokens`: the vocabulary layout of a BERT run. Building a
  vocabulary with `build_wordpiece_vocab(sentences, size, reserved_tokens=BERT_RESERVED_TOKENS)`
  gives `[PAD]`=0, `[UNK]`=1, `[START]`=2, `[END]`=3, `[CLS]`=4, `[SEP]`=5, `[MASK]`=6.
- `mask_tokens` / `masked_lm_dataset`: the masked language model's corruption, as TensorFlow
  ops seeded with stateless random ops (the output is a pure function of `(ids, seed)`), usable
  eagerly, in a `tf.function` and in `tf.data.Dataset.map`.
- `pack_segments`: one or two segments packed as `[CLS] A [SEP] B [SEP]` with segment ids and
  longest-first truncation.
- `next_sentence_pairs`: next-sentence-prediction pairs from the sentences of documents.

Example:

>>> tokens = BertTokens.from_vocab([*BERT_RESERVED_TOKENS, "el", "gato", "negro"])
>>> tokens.cls_id, tokens.sep_id, tokens.mask_id, tokens.vocab_size
(4, 5, 6, 10)
>>> token_ids, segment_ids = pack_segments([7, 8], [9], cls_id=4, sep_id=5, max_length=16)
>>> token_ids.tolist(), segment_ids.tolist()
([4, 7, 8, 5, 9, 5], [0, 0, 0, 0, 1, 1])

References:
    Devlin et al., 2018, "BERT: Pre-training of Deep Bidirectional Transformers for Language
    Understanding", arXiv:1810.04805 (section 3.1 and appendix A.1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from keras_attn.text.vocab import RESERVED_TOKENS

__all__ = [
    "BERT_RESERVED_TOKENS",
    "CLS_TOKEN",
    "MASK_TOKEN",
    "SEP_TOKEN",
    "BertTokens",
    "SentencePair",
    "mask_tokens",
    "masked_lm_dataset",
    "next_sentence_pairs",
    "pack_segments",
]

CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"

# Ids 0..6: padding, unknown, start, end, classification, separator, mask.
BERT_RESERVED_TOKENS = [*RESERVED_TOKENS, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN]

PAD_ID = 0


@dataclasses.dataclass(frozen=True)
class BertTokens:
    """The ids of BERT's special tokens in a vocabulary, and the vocabulary's size.

    Attributes:
        pad_id: `[PAD]`, always 0 (padding, and the label that the masked-LM loss ignores).
        cls_id: `[CLS]`, first token of every packed sequence.
        sep_id: `[SEP]`, the end of each segment.
        mask_id: `[MASK]`, the masked-LM replacement token.
        vocab_size: number of tokens in the vocabulary.
        special_ids: the ids of every token of `BERT_RESERVED_TOKENS`, sorted; the masked LM
            never selects them and never draws them as random replacements.
    """

    pad_id: int
    cls_id: int
    sep_id: int
    mask_id: int
    vocab_size: int
    special_ids: tuple[int, ...]

    @classmethod
    def from_vocab(cls, vocab: Sequence[str]) -> BertTokens:
        """Looks BERT's reserved tokens up in `vocab` (a list of tokens, id = position).

        Raises:
            ValueError: if a token of `BERT_RESERVED_TOKENS` is missing, or `[PAD]` is not id 0.
        """
        index = {token: i for i, token in enumerate(vocab)}
        missing = [token for token in BERT_RESERVED_TOKENS if token not in index]
        if missing:
            raise ValueError(
                f"Expected a vocabulary holding {BERT_RESERVED_TOKENS} (build it with "
                f"reserved_tokens=BERT_RESERVED_TOKENS). Missing: {missing}"
            )
        if index[RESERVED_TOKENS[0]] != PAD_ID:
            raise ValueError(
                f"Expected {RESERVED_TOKENS[0]!r} at id {PAD_ID}. "
                f"Received: vocab[:8]={list(vocab[:8])}"
            )
        return cls(
            pad_id=PAD_ID,
            cls_id=index[CLS_TOKEN],
            sep_id=index[SEP_TOKEN],
            mask_id=index[MASK_TOKEN],
            vocab_size=len(vocab),
            special_ids=tuple(sorted(index[token] for token in BERT_RESERVED_TOKENS)),
        )


def _check_fraction(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"Expected {name} in [0, 1]. Received: {name}={value}")
    return float(value)


def _replacement_ids(vocab_size: int, special_ids: Sequence[int]) -> np.ndarray:
    """The ids a random replacement is drawn from: all but padding and `special_ids`."""
    return np.setdiff1d(np.arange(vocab_size), [PAD_ID, *special_ids]).astype(np.int64)


def _check_masking_arguments(
    vocab_size: int,
    mask_id: int,
    special_ids: Sequence[int],
    rate: float,
    mask_fraction: float,
    random_fraction: float,
) -> np.ndarray:
    if int(vocab_size) != vocab_size or vocab_size < 1:
        raise ValueError(
            f"Expected a positive integer vocab_size. Received: vocab_size={vocab_size}"
        )
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"Expected mask_id in [0, {vocab_size}). Received: mask_id={mask_id}")
    bad = [i for i in special_ids if not 0 <= i < vocab_size]
    if bad:
        raise ValueError(
            f"Expected special_ids in [0, {vocab_size}). Received: special_ids={list(special_ids)}"
        )
    _check_fraction("rate", rate)
    _check_fraction("mask_fraction", mask_fraction)
    _check_fraction("random_fraction", random_fraction)
    if mask_fraction + random_fraction > 1.0:
        raise ValueError(
            "Expected mask_fraction + random_fraction <= 1. Received: "
            f"mask_fraction={mask_fraction}, random_fraction={random_fraction}"
        )
    replacements = _replacement_ids(vocab_size, special_ids)
    if random_fraction > 0 and replacements.size == 0:
        raise ValueError(
            "Expected at least one id outside special_ids and padding to draw random "
            f"replacements from. Received: vocab_size={vocab_size}, "
            f"special_ids={list(special_ids)}"
        )
    return replacements


def mask_tokens(
    ids,
    *,
    vocab_size: int,
    mask_id: int,
    special_ids: Sequence[int],
    seed,
    rate: float = 0.15,
    mask_fraction: float = 0.8,
    random_fraction: float = 0.1,
) -> tuple[tf.Tensor, tf.Tensor]:
    """BERT's masked-language-model corruption of token ids.

    For each row of `ids` (a batch `(batch, T)`, or one sequence `(T,)`), padded with id 0:

    1. A position is maskable when its id is neither 0 (padding) nor in `special_ids`. Each
       maskable position is chosen independently with probability `rate`. A row that has a
       maskable position but none chosen gets exactly one: its maskable position with the
       smallest uniform draw (so every row with content gives a training signal, as BERT
       implementations ensure): a row of `n` maskable tokens has `n · rate + (1 - rate)^n`
       chosen on average. With `rate=0` nothing is chosen.
    2. Each chosen position, independently: with probability `mask_fraction` becomes `mask_id`;
       with probability `random_fraction` becomes an id drawn uniformly from
       `[1, vocab_size)` minus `special_ids`; otherwise keeps its id.

    `labels` holds the original id at chosen positions and 0 elsewhere, the label that
    `masked_cross_entropy` ignores. The model is trained to predict `labels` from `inputs`.

    Args:
        ids: int tensor `(batch, T)` or `(T,)` of token ids, 0 for padding.
        vocab_size: number of tokens in the vocabulary.
        mask_id: id of `[MASK]`.
        special_ids: ids never chosen and never drawn as replacements (`BertTokens.special_ids`:
            `[PAD]`, `[UNK]`, `[START]`, `[END]`, `[CLS]`, `[SEP]`, `[MASK]`).
        seed: stateless seed, an int tensor of shape `[2]`. Same `(ids, seed)`, same output.
        rate: probability that a maskable position is chosen, in [0, 1] (BERT: 0.15).
        mask_fraction: share of chosen positions replaced by `mask_id` (BERT: 0.8).
        random_fraction: share replaced by a random id (BERT: 0.1); the remaining
            `1 - mask_fraction - random_fraction` keep their id.

    Returns:
        `(inputs, labels)`, both with the shape and dtype of `ids`.

    Raises:
        ValueError: for a fraction outside [0, 1], `mask_fraction + random_fraction > 1`, or
            ids outside the vocabulary.

    Example:

    >>> ids = tf.constant([[4, 10, 11, 12, 5, 0, 0]])
    >>> inputs, labels = mask_tokens(
    ...     ids, vocab_size=20, mask_id=6, special_ids=range(7), seed=[0, 1], rate=1.0,
    ...     mask_fraction=1.0, random_fraction=0.0)
    >>> inputs.numpy().tolist(), labels.numpy().tolist()
    ([[4, 6, 6, 6, 5, 0, 0]], [[0, 10, 11, 12, 0, 0, 0]])

    References:
        Devlin et al., 2018, "BERT: Pre-training of Deep Bidirectional Transformers for
        Language Understanding", arXiv:1810.04805 (section 3.1, task 1, and appendix C.2).
    """
    special_ids = [int(i) for i in special_ids]
    replacements = _check_masking_arguments(
        vocab_size, mask_id, special_ids, rate, mask_fraction, random_fraction
    )
    ids = tf.convert_to_tensor(ids)
    if ids.shape.rank not in (1, 2):
        raise ValueError(f"Expected ids of rank 1 or 2. Received: ids.shape={ids.shape}")
    rows = ids if ids.shape.rank == 2 else ids[None, :]  # (batch, T)
    # The split depends on the seed's dtype: int64 always, so [1, 2] and its int64 form agree.
    choose_seed, action_seed, token_seed = tf.unstack(
        tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3)
    )

    # Step 1: choose positions.
    special = tf.constant([PAD_ID, *special_ids], dtype=rows.dtype)
    maskable = tf.reduce_all(tf.not_equal(rows[..., None], special), axis=-1)  # (batch, T)
    draws = tf.random.stateless_uniform(tf.shape(rows), choose_seed)
    chosen = maskable & (draws < rate)
    if rate > 0:
        # A sentinel column keeps argmin defined for empty rows (T = 0).
        scores = tf.pad(tf.where(maskable, draws, 2.0), [[0, 0], [0, 1]], constant_values=3.0)
        first = tf.argmin(scores, axis=-1)  # (batch,)
        needs_one = tf.reduce_any(maskable, axis=-1) & ~tf.reduce_any(chosen, axis=-1)
        forced = tf.one_hot(first, tf.shape(rows)[1], on_value=True, off_value=False)
        chosen = chosen | (forced & needs_one[:, None])

    # Step 2: what each chosen position becomes.
    action = tf.random.stateless_uniform(tf.shape(rows), action_seed)
    to_mask = chosen & (action < mask_fraction)
    to_random = chosen & (action >= mask_fraction) & (action < mask_fraction + random_fraction)
    inputs = tf.where(to_mask, tf.cast(mask_id, rows.dtype), rows)
    if replacements.size:
        pick = tf.random.stateless_uniform(
            tf.shape(rows), token_seed, minval=0, maxval=replacements.size, dtype=tf.int32
        )
        random_ids = tf.gather(tf.constant(replacements, dtype=rows.dtype), pick)
        inputs = tf.where(to_random, random_ids, inputs)
    labels = tf.where(chosen, rows, tf.zeros_like(rows))
    if ids.shape.rank == 1:
        return inputs[0], labels[0]
    return inputs, labels


def masked_lm_dataset(
    dataset: tf.data.Dataset,
    seed: int,
    *,
    vocab_size: int,
    mask_id: int,
    special_ids: Sequence[int],
    rate: float = 0.15,
    mask_fraction: float = 0.8,
    random_fraction: float = 0.1,
) -> tf.data.Dataset:
    """Maps `mask_tokens` over a dataset, element `i` with the stateless seed `(seed, i)`.

    The corrupted dataset is the same on every pass and every run; elements are corrupted
    independently. An element is either

    - a tensor of ids, `(batch, T)` or `(T,)`: it becomes the pair `(inputs, labels)`;
    - a dict with a `"token_ids"` entry: `"token_ids"` is replaced by the corrupted ids and
      `"mlm_labels"` is added; the other entries (segment ids, NSP labels, ...) pass through.

    Args:
        dataset: the dataset of ids.
        seed: an int; element `i` uses `(seed, i)`.
        vocab_size, mask_id, special_ids, rate, mask_fraction, random_fraction: as in
            `mask_tokens`; validated here, before the dataset is iterated.

    Example:

    >>> batches = tf.data.Dataset.from_tensor_slices(tf.constant([[[7, 8, 0]], [[9, 0, 0]]]))
    >>> corrupted = masked_lm_dataset(
    ...     batches, seed=3, vocab_size=10, mask_id=6, special_ids=range(7), rate=1.0,
    ...     mask_fraction=1.0, random_fraction=0.0)
    >>> [(x.numpy().tolist(), y.numpy().tolist()) for x, y in corrupted]
    [([[6, 6, 0]], [[7, 8, 0]]), ([[6, 0, 0]], [[9, 0, 0]])]
    """
    special_ids = [int(i) for i in special_ids]
    _check_masking_arguments(vocab_size, mask_id, special_ids, rate, mask_fraction, random_fraction)
    kwargs = {
        "vocab_size": vocab_size,
        "mask_id": mask_id,
        "special_ids": special_ids,
        "rate": rate,
        "mask_fraction": mask_fraction,
        "random_fraction": random_fraction,
    }
    seed = tf.cast(seed, tf.int64)

    def apply(index, element):
        element_seed = tf.stack([seed, index])
        if isinstance(element, Mapping):
            inputs, labels = mask_tokens(element["token_ids"], seed=element_seed, **kwargs)
            return {**element, "token_ids": inputs, "mlm_labels": labels}
        return mask_tokens(element, seed=element_seed, **kwargs)

    return dataset.enumerate().map(apply, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _truncated_lengths(first: int, second: int, budget: int) -> tuple[int, int]:
    """Longest-first truncation: drop one token from the longer segment (the second on a tie)."""
    while first + second > budget:
        if first > second:
            first -= 1
        else:
            second -= 1
    return first, second


def pack_segments(
    first: Sequence[int] | np.ndarray,
    second: Sequence[int] | np.ndarray | None = None,
    *,
    cls_id: int,
    sep_id: int,
    max_length: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Packs one or two segments of ids as BERT's input: `[CLS] A [SEP] B [SEP]`.

    Segment ids are 0 for `[CLS] A [SEP]` and 1 for `B [SEP]`. With `second` None or empty the
    result is `[CLS] A [SEP]`, all segment 0. When the total exceeds `max_length`, tokens are
    dropped from the end of the longer segment, one at a time (from the second on a tie), until
    it fits (BERT's longest-first truncation). Sequences are not padded: batch them with
    `padded_batch` (id 0, segment 0) and mask the padding.

    Args:
        first: ids of segment A (a list or 1-D array; no special tokens).
        second: ids of segment B, or None.
        cls_id: id of `[CLS]`.
        sep_id: id of `[SEP]`.
        max_length: maximum length of the packed sequence, special tokens included (at least 3
            with a second segment, 2 without).

    Returns:
        `(token_ids, segment_ids)`, two int32 arrays of the same length, at most `max_length`.

    Raises:
        ValueError: if `max_length` cannot hold the special tokens, or a segment is not 1-D.

    Example:

    >>> token_ids, segment_ids = pack_segments(
    ...     [10, 11, 12, 13, 14], [20, 21], cls_id=4, sep_id=5, max_length=8)
    >>> token_ids.tolist(), segment_ids.tolist()
    ([4, 10, 11, 12, 5, 20, 21, 5], [0, 0, 0, 0, 0, 1, 1, 1])

    References:
        Devlin et al., 2018, "BERT: Pre-training of Deep Bidirectional Transformers for
        Language Understanding", arXiv:1810.04805 (section 3, "Input/Output Representations").
    """
    first = np.asarray(first, dtype=np.int32)
    pair = second is not None and np.size(second) > 0
    second = np.asarray(second, dtype=np.int32) if pair else np.zeros(0, np.int32)
    for name, segment in (("first", first), ("second", second)):
        if segment.ndim != 1:
            raise ValueError(f"Expected a 1-D {name} segment. Received: shape={segment.shape}")
    specials = 3 if pair else 2
    if max_length < specials:
        raise ValueError(
            f"Expected max_length >= {specials} ([CLS] and {specials - 1} [SEP]). "
            f"Received: max_length={max_length}"
        )
    keep_first, keep_second = _truncated_lengths(len(first), len(second), max_length - specials)
    parts = [[cls_id], first[:keep_first], [sep_id]]
    segments = [np.zeros(keep_first + 2, np.int32)]
    if pair:
        parts += [second[:keep_second], [sep_id]]
        segments.append(np.ones(keep_second + 1, np.int32))
    return np.concatenate(parts).astype(np.int32), np.concatenate(segments)


class SentencePair(NamedTuple):
    """One next-sentence-prediction example.

    Attributes:
        first: segment A, a sentence.
        second: segment B, a sentence, or None for a single-segment example.
        is_next: 1 when B follows A in its document, 0 when B is a random sentence from another
            document, -1 for a single-segment example (no NSP target: skip its NSP loss).
    """

    first: Any
    second: Any
    is_next: int


def next_sentence_pairs(
    documents: Sequence[Sequence[Any]], *, seed: int, ordered: bool = True
) -> list[SentencePair]:
    """Next-sentence-prediction examples from documents, each a sequence of sentences.

    Sentences may be anything (strings, id arrays): they are only placed into pairs.

    With `ordered=True` (a corpus whose sentences follow each other: verses of a chapter,
    paragraphs of a help page), every sentence `s_i` that has a successor in its document gives
    one example: with probability 1/2 `(s_i, s_{i+1}, 1)`, otherwise `(s_i, r, 0)` with `r`
    drawn uniformly from the sentences of all the *other* documents. Examples come in document
    order. A document's last sentence (and a one-sentence document) is never segment A but can
    be drawn as a random B.

    With `ordered=False` (a corpus with no sentence order) there is no true next sentence to
    learn from: every sentence becomes a single-segment example `(s, None, -1)`, and the NSP
    loss is skipped for label -1.

    The output is a pure function of `(documents, seed, ordered)`.

    Args:
        documents: the documents, each a sequence of sentences.
        seed: an int seeding NumPy's `default_rng`.
        ordered: whether sentence order within a document is meaningful.

    Returns:
        A list of `SentencePair(first, second, is_next)`.

    Raises:
        ValueError: with `ordered=True`, if fewer than two documents hold sentences (no other
            document to draw a random sentence from).

    Example:

    >>> docs = [["a1", "a2", "a3"], ["b1", "b2"]]
    >>> pairs = next_sentence_pairs(docs, seed=0)
    >>> [p.first for p in pairs]
    ['a1', 'a2', 'b1']
    >>> all(p.is_next == 0 or (p.first[0] == p.second[0]) for p in pairs)
    True
    >>> next_sentence_pairs([["x", "y"]], seed=0, ordered=False)
    [SentencePair(first='x', second=None, is_next=-1),
     SentencePair(first='y', second=None, is_next=-1)]

    References:
        Devlin et al., 2018, "BERT: Pre-training of Deep Bidirectional Transformers for
        Language Understanding", arXiv:1810.04805 (section 3.1, task 2).
    """
    documents = [list(document) for document in documents]
    if not ordered:
        return [SentencePair(s, None, -1) for document in documents for s in document]
    if sum(1 for document in documents if document) < 2:
        raise ValueError(
            "Expected at least two documents with sentences for next-sentence pairs (random "
            f"second sentences come from another document). Received: {len(documents)} "
            "document(s). Use ordered=False for single-segment examples."
        )
    starts = np.cumsum([0] + [len(document) for document in documents])
    total = int(starts[-1])
    rng = np.random.default_rng(seed)
    pairs = []
    for d, document in enumerate(documents):
        others = total - len(document)
        for i in range(len(document) - 1):
            if rng.random() < 0.5:
                pairs.append(SentencePair(document[i], document[i + 1], 1))
                continue
            # Uniform over the other documents' sentences: skip this document's block.
            k = int(rng.integers(others))
            k += len(document) if k >= starts[d] else 0
            owner = int(np.searchsorted(starts, k, side="right")) - 1
            pairs.append(SentencePair(document[i], documents[owner][k - starts[owner]], 0))
    return pairs
