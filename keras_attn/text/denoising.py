"""BART and mBART pre-training data: the vocabulary layout and denoising examples.

- `bart_reserved_tokens` and `BartTokens`: the vocabulary layout of a (m)BART run. Building a
  vocabulary with `build_wordpiece_vocab(sentences, size, reserved_tokens=bart_reserved_tokens(
  ["en", "es"]))` gives `[PAD]`=0, `[UNK]`=1, `[START]`=2, `[END]`=3, `[MASK]`=4, `[SEP]`=5, then
  one language tag per language, `[en]`=6, `[es]`=7.
- `group_sentences`: consecutive sentences of a corpus grouped into documents that fit.
- `denoising_example` / `denoising_dataset`: `(source, target)` pairs for a sequence-to-sequence
  model that learns to rebuild a document from its noised version (`noising.denoise`).

Example layout, for a document of two sentences `a b .` and `c d ?` and `max_length=16`:

    target               [START] a b . [SEP] c d ? [SEP] [END]
    source (BART)        c [MASK] ? [SEP] a b . [SEP]                   the noised document
    source (mBART, en)   c [MASK] ? [SEP] a b . [SEP] [END] [en]

Every sentence ends with `[SEP]`, the delimiter along which `sentence_permutation` cuts the
document. It is a token of its own rather than `[END]`, which stops decoding, or the sentence's
final punctuation, which not every sentence has and which is not a single id. The model learns
to emit it between sentences; fine-tuning data, one sentence per example, holds none.

The BART source holds no special token, as the sources of the translation data do. The mBART
source is followed by `[END]` and the document's language tag (Liu et al., 2020).
The target starts with `[START]`, the first input of this library's decoders; with
`start_id=language_id` it is mBART's own target, `[lang] … [END]`, whose decoding then starts
from the language tag.

Example:

>>> tokens = BartTokens.from_vocab([*bart_reserved_tokens(["en"]), "a", "b", "."])
>>> tokens.mask_id, tokens.sentence_end_id, tokens.language_ids
(4, 5, {'en': 6})
>>> source, target = denoising_example(
...     [[7, 8, 9]], seed=(0, 0), start_id=2, end_id=3, mask_id=4, sentence_end_id=5,
...     language_id=6, max_length=16, noises=())
>>> source.tolist(), target.tolist()
([7, 8, 9, 5, 3, 6], [2, 7, 8, 9, 5, 3])

References:
    Lewis et al., 2019, "BART: Denoising Sequence-to-Sequence Pre-training for Natural Language
    Generation, Translation, and Comprehension", arXiv:1910.13461 (sections 2.2 and 5).
    Liu et al., 2020, "Multilingual Denoising Pre-training for Neural Machine Translation",
    arXiv:2001.08210.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from keras_attn.text.noising import DEFAULT_NOISES, check_noise_options, denoise
from keras_attn.text.vocab import RESERVED_TOKENS

__all__ = [
    "MASK_TOKEN",
    "SEP_TOKEN",
    "BartTokens",
    "bart_reserved_tokens",
    "denoising_dataset",
    "denoising_example",
    "group_sentences",
    "language_tag",
]

MASK_TOKEN = "[MASK]"
SEP_TOKEN = "[SEP]"

_LANGUAGE_CODE = re.compile(r"[a-z]{2,3}")
_MIN_LENGTH = 4


def language_tag(code: str) -> str:
    """The language tag token of an ISO 639 code: `language_tag("es") == "[es]"`.

    Args:
        code: 2 or 3 lowercase ASCII letters.

    Raises:
        ValueError: if `code` is not 2 or 3 lowercase letters.
    """
    if not isinstance(code, str) or not _LANGUAGE_CODE.fullmatch(code):
        raise ValueError(
            f"Expected a language code of 2 or 3 lowercase letters. Received: code={code!r}"
        )
    return f"[{code}]"


def bart_reserved_tokens(languages: Sequence[str] = ()) -> list[str]:
    """The reserved tokens of a (m)BART vocabulary, in id order.

    `[PAD]`, `[UNK]`, `[START]`, `[END]` (ids 0–3, as every vocabulary here), `[MASK]` (4),
    `[SEP]` (5, the end of every sentence), then one tag per language in the order given (6, …).

    Args:
        languages: language codes (2–3 lowercase letters), each at most once; empty for BART.

    Example:

    >>> bart_reserved_tokens(["es", "en"])
    ['[PAD]', '[UNK]', '[START]', '[END]', '[MASK]', '[SEP]', '[es]', '[en]']
    """
    if isinstance(languages, str):
        raise ValueError(
            f"Expected a sequence of language codes. Received: languages={languages!r}"
        )
    tags = [language_tag(code) for code in languages]
    if len(set(tags)) != len(tags):
        raise ValueError(f"Expected each language once. Received: languages={list(languages)}")
    return [*RESERVED_TOKENS, MASK_TOKEN, SEP_TOKEN, *tags]


@dataclasses.dataclass(frozen=True)
class BartTokens:
    """The ids of (m)BART's special tokens in a vocabulary.

    Attributes:
        start_id: `[START]`, the first token of every target.
        end_id: `[END]`, the last token of every target (and before an mBART source's tag).
        mask_id: `[MASK]`, the token of masked tokens and infilled spans.
        sentence_end_id: `[SEP]`, the token that ends every sentence.
        language_ids: language code → id of its tag, for the tags found in the vocabulary.
    """

    start_id: int
    end_id: int
    mask_id: int
    sentence_end_id: int
    language_ids: dict[str, int]

    @classmethod
    def from_vocab(cls, vocab: Sequence[str]) -> BartTokens:
        """Looks (m)BART's reserved tokens up in `vocab` (a list of tokens, id = position).

        Language tags are the tokens `[xx]` or `[xxx]` of lowercase letters.

        Raises:
            ValueError: if a token of `bart_reserved_tokens()` is missing.
        """
        index = {token: i for i, token in enumerate(vocab)}
        missing = [token for token in bart_reserved_tokens() if token not in index]
        if missing:
            raise ValueError(
                "Expected a vocabulary holding bart_reserved_tokens() (build it with "
                f"reserved_tokens=bart_reserved_tokens(languages)). Missing: {missing}"
            )
        languages = {
            token[1:-1]: i
            for token, i in index.items()
            if token.startswith("[")
            and token.endswith("]")
            and _LANGUAGE_CODE.fullmatch(token[1:-1])
        }
        return cls(
            start_id=index[RESERVED_TOKENS[2]],
            end_id=index[RESERVED_TOKENS[3]],
            mask_id=index[MASK_TOKEN],
            sentence_end_id=index[SEP_TOKEN],
            language_ids=languages,
        )


def _check_max_length(max_length: int) -> int:
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < _MIN_LENGTH:
        raise ValueError(
            f"Expected max_length to be an int >= {_MIN_LENGTH}. Received: max_length={max_length}"
        )
    return max_length


def group_sentences(
    sentences: Sequence[Sequence[int]], *, max_length: int
) -> list[list[list[int]]]:
    """Groups consecutive sentences into documents that `denoising_example` keeps whole.

    Sentences are taken in order and added to the current document while its sentences, each
    with its `[SEP]`, fit in `max_length - 2` tokens; the next one starts a new document. A
    sentence longer than that is a document of its own (which `denoising_example` cuts).
    Sentences without tokens are dropped.

    Args:
        sentences: token ids of consecutive sentences (of a text where order exists, or not).
        max_length: as `denoising_example` takes it (at least 4).

    Returns:
        The documents, each a list of sentences; together, the non-empty sentences in order.

    Example:

    >>> group_sentences([[7, 8], [9], [], [10, 11, 12]], max_length=7)
    [[[7, 8], [9]], [[10, 11, 12]]]
    """
    _check_max_length(max_length)
    budget = max_length - 2
    documents: list[list[list[int]]] = []
    used = budget  # no open document yet
    for sentence in sentences:
        sentence = list(sentence)
        if not sentence:
            continue
        if used + len(sentence) + 1 > budget:
            documents.append([])
            used = 0
        documents[-1].append(sentence)
        used += len(sentence) + 1
    return documents


def _example(
    sentences: tf.RaggedTensor,
    seed,
    *,
    start_id: int,
    end_id: int,
    mask_id: int,
    sentence_end_id: int,
    language_id: int | None,
    max_length: int,
    noises: Sequence[str],
    mask_ratio: float,
    poisson_lambda: float,
    deletion_ratio: float,
) -> tuple[tf.Tensor, tf.Tensor]:
    """`(source, target)` of one document, `sentences` a `(sentences, None)` ragged tensor."""
    dtype = sentences.dtype
    budget = max_length - 2  # the target's START and END

    # Every sentence ends with SEP; whole sentences are kept while they fit in the budget.
    ends = tf.fill([sentences.nrows(), 1], tf.cast(sentence_end_id, dtype))
    ended = tf.concat([sentences, ends], axis=1)  # (sentences, None)
    fits = tf.cast(tf.cumsum(ended.row_lengths()) <= budget, tf.int32)
    count = tf.maximum(tf.reduce_sum(fits), tf.minimum(tf.cast(ended.nrows(), tf.int32), 1))
    body = ended[:count].flat_values
    # A first sentence longer than the budget is cut, and still ends with SEP.
    body = tf.concat([body[:-1][: budget - 1], body[-1:]], axis=0)

    noised = denoise(
        body,
        seed=seed,
        mask_id=mask_id,
        sentence_end_id=sentence_end_id,
        noises=noises,
        mask_ratio=mask_ratio,
        poisson_lambda=poisson_lambda,
        deletion_ratio=deletion_ratio,
    )
    suffix = [] if language_id is None else [end_id, language_id]
    source = tf.concat([noised[: max_length - len(suffix)], tf.constant(suffix, dtype)], axis=0)
    target = tf.concat([tf.constant([start_id], dtype), body, tf.constant([end_id], dtype)], 0)
    return source, target


@functools.lru_cache(maxsize=16)
def _traced_example(**options) -> Callable[..., tuple[tf.Tensor, tf.Tensor]]:
    """`_example` as one graph for int32 documents given as values and row lengths."""

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.int32),
            tf.TensorSpec([None], tf.int64),
            tf.TensorSpec([2], tf.int64),
        ]
    )
    def example(values, row_lengths, seed):
        document = tf.RaggedTensor.from_row_lengths(values, row_lengths)
        return _example(document, seed, **options)

    return example


def denoising_example(
    document_ids: Sequence[Sequence[int]],
    *,
    seed: Sequence[int],
    start_id: int,
    end_id: int,
    mask_id: int,
    sentence_end_id: int,
    max_length: int,
    language_id: int | None = None,
    noises: Sequence[str] = DEFAULT_NOISES,
    mask_ratio: float = 0.3,
    poisson_lambda: float = 3.0,
    deletion_ratio: float = 0.3,
) -> tuple[np.ndarray, np.ndarray]:
    """One (m)BART denoising pair: the noised document as source, the document as target.

    1. Each sentence of the document gets `sentence_end_id` appended; sentences are kept, in
       order, while the total fits in `max_length - 2` tokens (a first sentence longer than
       that is cut to `max_length - 3` tokens, then ended). This is the document `D`.
    2. `target = [start_id] + D + [end_id]`.
    3. `source = denoise(D)` (`noising.denoise`, with `noises` and the rates given), cut to
       `max_length` tokens; with `language_id`, cut to `max_length - 2` and followed by
       `[end_id, language_id]` (mBART).

    Source and target have at most `max_length` tokens. The pair is a pure function of the
    arguments; `seed=(s, i)` gives element `i` of `denoising_dataset(..., seed=s)`.

    Args:
        document_ids: the document's sentences, each a sequence of token ids without special
            tokens (as `WordPieceTokenizer.tokenize` gives them).
        seed: two ints, the stateless seed of the noise.
        start_id, end_id, mask_id: ids of `[START]`, `[END]` and `[MASK]`.
        sentence_end_id: id of `[SEP]`, appended to every sentence.
        max_length: the longest source and target, special tokens included (at least 4).
        language_id: id of the document's language tag (mBART), or None (BART).
        noises, mask_ratio, poisson_lambda, deletion_ratio: the noise, as `noising.denoise`
            takes it; the default is text infilling (30 %, λ = 3) after sentence permutation.

    Returns:
        `(source_ids, target_ids)`, two 1-D int32 NumPy arrays.

    Raises:
        ValueError: on an empty document, a bad `max_length`, rate or noise name.
    """
    _check_max_length(max_length)
    noises = check_noise_options(noises, mask_ratio, poisson_lambda, deletion_ratio)
    sentences = [list(sentence) for sentence in document_ids]
    if not sentences:
        raise ValueError("Expected a document of at least one sentence. Received: document_ids=[]")
    values = np.asarray([token for sentence in sentences for token in sentence], np.int32)
    example = _traced_example(
        start_id=start_id,
        end_id=end_id,
        mask_id=mask_id,
        sentence_end_id=sentence_end_id,
        language_id=language_id,
        max_length=max_length,
        noises=noises,
        mask_ratio=mask_ratio,
        poisson_lambda=poisson_lambda,
        deletion_ratio=deletion_ratio,
    )
    source, target = example(
        tf.constant(values, tf.int32, shape=[len(values)]),
        tf.constant([len(sentence) for sentence in sentences], tf.int64),
        tf.constant(seed, tf.int64, shape=[2]),
    )
    return source.numpy(), target.numpy()


def denoising_dataset(
    documents: tf.data.Dataset,
    *,
    seed: int,
    start_id: int,
    end_id: int,
    mask_id: int,
    sentence_end_id: int,
    max_length: int,
    language_id: int | None = None,
    noises: Sequence[str] = DEFAULT_NOISES,
    mask_ratio: float = 0.3,
    poisson_lambda: float = 3.0,
    deletion_ratio: float = 0.3,
) -> tf.data.Dataset:
    """`denoising_example` mapped over a dataset of documents, element `i` seeded `(seed, i)`.

    The noise is the same on every pass over the dataset and in every run. For several
    languages (mBART), build one dataset per language, with its `language_id` and a seed of
    its own, and mix them (`tf.data.Dataset.sample_from_datasets`).

    Args:
        documents: a dataset whose elements are int `(sentences, None)` ragged tensors, one
            document each (e.g. `Dataset.from_tensor_slices(tf.ragged.constant(docs))`).
        seed: an int; element `i` uses the stateless seed `(seed, i)`.
        start_id, end_id, mask_id, sentence_end_id, max_length, language_id, noises,
            mask_ratio, poisson_lambda, deletion_ratio: as `denoising_example` takes them.

    Returns:
        A dataset of `(source_ids, target_ids)` 1-D tensors of the documents' dtype.

    Example:

    >>> docs = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[[7, 8], [9]]]))
    >>> pairs = denoising_dataset(docs, seed=1, start_id=2, end_id=3, mask_id=4,
    ...                           sentence_end_id=5, max_length=16, noises=())
    >>> [(s.numpy().tolist(), t.numpy().tolist()) for s, t in pairs]
    [([7, 8, 5, 9, 5], [2, 7, 8, 5, 9, 5, 3])]
    """
    _check_max_length(max_length)
    noises = check_noise_options(noises, mask_ratio, poisson_lambda, deletion_ratio)
    seed = tf.cast(seed, tf.int64)
    options = dict(
        start_id=start_id,
        end_id=end_id,
        mask_id=mask_id,
        sentence_end_id=sentence_end_id,
        language_id=language_id,
        max_length=max_length,
        noises=noises,
        mask_ratio=mask_ratio,
        poisson_lambda=poisson_lambda,
        deletion_ratio=deletion_ratio,
    )

    def apply(index, document):
        return _example(document, tf.stack([seed, index]), **options)

    return documents.enumerate().map(apply, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
