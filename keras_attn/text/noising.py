"""BART's document-noising functions as TensorFlow transforms for `tf.data` pipelines.

Each function takes one document, a 1-D int tensor of token ids, and a stateless `seed` (an int
tensor of shape `[2]`, as `tf.random.stateless_*` takes), and returns the noised 1-D ids. The
output is a pure function of `(ids, seed)`. The functions use TensorFlow ops only, so they run
eagerly, in a `tf.function` or in `tf.data.Dataset.map`; `noise_dataset` maps one of them over a
dataset with a different seed per element.

    token_masking         each token replaced by MASK with probability `rate`
    token_deletion        each token dropped with probability `rate`
    text_infilling        spans with Poisson(λ) lengths, each replaced by ONE mask token
    sentence_permutation  sentences (ended by `sentence_end_id`) shuffled
    document_rotation     the document rotated to start at a uniformly chosen token

`denoise` composes any of them in a fixed order, each with its own seed drawn from one.

Example:

>>> ids = tf.range(1, 11)
>>> rotated = document_rotation(ids, seed=[1, 2])
>>> sorted(rotated.numpy().tolist()) == list(range(1, 11))
True
>>> int(tf.size(token_deletion(ids, rate=0.0, seed=[0, 0])))
10

References:
    Lewis et al., 2019, "BART: Denoising Sequence-to-Sequence Pre-training for Natural Language
    Generation, Translation, and Comprehension", arXiv:1910.13461 (section 2.2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf

__all__ = [
    "DEFAULT_NOISES",
    "NOISES",
    "check_noise_options",
    "denoise",
    "document_rotation",
    "noise_dataset",
    "sentence_permutation",
    "text_infilling",
    "token_deletion",
    "token_masking",
]

# The order in which `denoise` applies the noising functions it is given.
NOISES = (
    "sentence_permutation",
    "document_rotation",
    "token_deletion",
    "token_masking",
    "text_infilling",
)
# BART's pre-training noise (Lewis et al., 2019, section 5).
DEFAULT_NOISES = ("text_infilling", "sentence_permutation")


def _check_rate(rate: float, upper: float = 1.0) -> float:
    if not 0.0 <= rate <= upper:
        raise ValueError(f"Expected rate in [0, {upper}]. Received: rate={rate}")
    return float(rate)


def token_masking(ids, mask_id: int, rate: float = 0.15, seed=(0, 0)) -> tf.Tensor:
    """Replace each token by `mask_id` independently with probability `rate` (BERT-style).

    The length is kept; every position either keeps its id or holds `mask_id`.
    """
    rate = _check_rate(rate)
    ids = tf.convert_to_tensor(ids)
    draws = tf.random.stateless_uniform(tf.shape(ids), seed)
    return tf.where(draws < rate, tf.cast(mask_id, ids.dtype), ids)


def token_deletion(ids, rate: float = 0.15, seed=(0, 0)) -> tf.Tensor:
    """Drop each token independently with probability `rate`; the rest keep their order.

    Unlike masking, the model must find where input is missing.
    """
    rate = _check_rate(rate)
    ids = tf.convert_to_tensor(ids)
    draws = tf.random.stateless_uniform(tf.shape(ids), seed)
    return tf.boolean_mask(ids, draws >= rate)


def text_infilling(
    ids, mask_id: int, rate: float = 0.3, poisson_lambda: float = 3.0, seed=(0, 0)
) -> tf.Tensor:
    """Replace spans of tokens, with Poisson(λ) lengths, by a single `mask_id` each.

    Generative process, for a document of `n` tokens:

    1. Span lengths `L_1, L_2, …` ~ Poisson(λ) i.i.d.; spans are taken while the tokens already
       taken are fewer than `round(rate · n)` (the last span may overshoot; the total is capped
       at `n` by shortening the last span).
    2. The `U = n - M` tokens left (`M` masked tokens) keep their order; each span goes in its
       own gap among the `U + 1` gaps around them (distinct gaps chosen uniformly), so spans never
       touch and each becomes exactly ONE mask token. A 0-length span inserts a mask without
       removing anything. (If there are more spans than gaps, which needs `M` close to `n`, the
       surplus spans are merged into the last one.)

    The output has `U + S` tokens for `S` spans: the kept tokens in order with `S` masks.

    Args:
        ids: 1-D int tensor.
        mask_id: the mask token id.
        rate: fraction of tokens to mask, in [0, 1].
        poisson_lambda: mean span length λ (BART: 3).
        seed: int tensor of shape `[2]`.
    """
    rate = _check_rate(rate)
    if poisson_lambda < 0:
        raise ValueError(f"Expected poisson_lambda >= 0. Received: poisson_lambda={poisson_lambda}")
    ids = tf.convert_to_tensor(ids)
    n = tf.shape(ids)[0]
    length_seed, gap_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    target = tf.cast(tf.round(rate * tf.cast(n, tf.float32)), tf.int32)

    # Step 1. n + 16 draws: fewer than `target` tokens in all of them has probability < e^-48.
    draws = tf.random.stateless_poisson([n + 16], length_seed, poisson_lambda, dtype=tf.int32)
    before = tf.cumsum(draws, exclusive=True)  # tokens taken before span i
    num_spans = tf.reduce_sum(tf.cast(before < target, tf.int32))
    taken = tf.minimum(tf.cumsum(draws[:num_spans]), n)  # capped at n
    lengths = taken - tf.concat([[0], taken[:-1]], axis=0)
    masked = tf.reduce_sum(lengths)
    kept = n - masked
    # Surplus spans (more than kept + 1 gaps) join the last span that has a gap.
    num_gaps_used = tf.minimum(num_spans, kept + 1)
    segment = tf.minimum(tf.range(num_spans), num_gaps_used - 1)
    lengths = tf.math.unsorted_segment_sum(lengths, segment, num_gaps_used)

    # Step 2. Gap g lies just before kept token g (gap `kept` is after the last one).
    order = tf.argsort(tf.random.stateless_uniform([kept + 1], gap_seed))
    gaps = tf.sort(order[:num_gaps_used])  # (S,)
    has_span = tf.scatter_nd(gaps[:, None], tf.ones_like(gaps), [kept + 1])
    span_length = tf.scatter_nd(gaps[:, None], lengths, [kept + 1])
    kept_index = tf.range(kept)
    source_index = kept_index + tf.cumsum(span_length)[:kept]  # where kept token g was
    output_index = kept_index + tf.cumsum(has_span)[:kept]  # where it goes
    # Every other output position is the mask of one span.
    output = tf.fill([kept + num_gaps_used], tf.cast(mask_id, ids.dtype))
    return tf.tensor_scatter_nd_update(output, output_index[:, None], tf.gather(ids, source_index))


def sentence_permutation(ids, sentence_end_id: int, seed=(0, 0)) -> tf.Tensor:
    """Shuffle the document's sentences uniformly.

    A sentence ends with (and includes) `sentence_end_id`; tokens after the last end form a final
    sentence. The output is the same sentences, each intact, in a random order.
    """
    ids = tf.convert_to_tensor(ids)
    ends = tf.cast(tf.equal(ids, tf.cast(sentence_end_id, ids.dtype)), tf.int32)
    sentence = tf.cumsum(ends, exclusive=True)  # sentence index of every token
    num_sentences = tf.reduce_max(tf.concat([sentence + 1, [0]], axis=0))
    sentences = tf.RaggedTensor.from_value_rowids(ids, sentence, nrows=num_sentences)
    order = tf.argsort(tf.random.stateless_uniform([num_sentences], seed))
    return tf.gather(sentences, order).flat_values


def document_rotation(ids, seed=(0, 0)) -> tf.Tensor:
    """Rotate the document so that it starts at a token chosen uniformly at random.

    `output = ids[k:] + ids[:k]` with `k` uniform in `[0, n)`: the model must find the start.
    """
    ids = tf.convert_to_tensor(ids)
    n = tf.shape(ids)[0]
    start = tf.random.stateless_uniform([], seed, minval=0, maxval=tf.maximum(n, 1), dtype=tf.int32)
    return tf.concat([ids[start:], ids[:start]], axis=0)


def noise_dataset(
    dataset: tf.data.Dataset, transform: Callable[..., tf.Tensor], seed: int, **kwargs
) -> tf.data.Dataset:
    """Map `transform(ids, seed=(seed, i), **kwargs)` over a dataset of 1-D documents.

    Element `i` gets the stateless seed `(seed, i)`: the noised dataset is the same on every
    pass and every run, and elements are noised independently.

    Example:

    >>> docs = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[5, 6, 7], [8, 9]]))
    >>> noised = noise_dataset(docs, token_masking, seed=3, mask_id=4, rate=1.0)
    >>> [d.numpy().tolist() for d in noised]
    [[4, 4, 4], [4, 4]]
    """
    seed = tf.cast(seed, tf.int64)

    def apply(index, ids):
        return transform(ids, seed=tf.stack([seed, index]), **kwargs)

    return dataset.enumerate().map(apply, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def check_noise_options(
    noises: Sequence[str], mask_ratio: float, poisson_lambda: float, deletion_ratio: float
) -> tuple[str, ...]:
    """Validates `denoise`'s noise options; returns `noises` as a tuple.

    Raises:
        ValueError: naming the argument and its value, on an unknown or repeated noise name, a
            ratio outside [0, 1] or a negative `poisson_lambda`.
    """
    if isinstance(noises, str) or not all(isinstance(name, str) for name in noises):
        raise ValueError(
            f"Expected noises to be a sequence of names from {NOISES}. Received: noises={noises!r}"
        )
    unknown = [name for name in noises if name not in NOISES]
    if unknown:
        raise ValueError(
            f"Expected noises among {NOISES}. Received: noises={tuple(noises)!r} "
            f"(unknown: {unknown})"
        )
    if len(set(noises)) != len(noises):
        raise ValueError(f"Expected each noise at most once. Received: noises={tuple(noises)!r}")
    for name, ratio in (("mask_ratio", mask_ratio), ("deletion_ratio", deletion_ratio)):
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"Expected {name} in [0, 1]. Received: {name}={ratio}")
    if poisson_lambda < 0:
        raise ValueError(f"Expected poisson_lambda >= 0. Received: poisson_lambda={poisson_lambda}")
    return tuple(noises)


def denoise(
    ids,
    *,
    seed,
    mask_id: int,
    sentence_end_id: int,
    noises: Sequence[str] = DEFAULT_NOISES,
    mask_ratio: float = 0.3,
    poisson_lambda: float = 3.0,
    deletion_ratio: float = 0.3,
) -> tf.Tensor:
    """Noise one document with several of BART's noising functions, composed in a fixed order.

    The functions named in `noises` are applied in the order of `NOISES`, whatever the order
    they are named in, each to the output of the previous one:

        sentence_permutation → document_rotation → token_deletion → token_masking
        → text_infilling

    so sentences are shuffled and the document rotated before tokens are dropped or masked.
    Each function gets its own stateless seed: `seed`, as int64, is split in five, one per entry
    of `NOISES`, so adding or removing one noise leaves the draws of the others unchanged.

    The defaults are BART's pre-training noise (Lewis et al., 2019, section 5): all sentences
    permuted, then text infilling of 30 % of the tokens with Poisson(λ = 3) span lengths.

    Args:
        ids: 1-D int tensor, one document.
        seed: int tensor of shape `[2]`, as `tf.random.stateless_*` takes.
        mask_id: the mask token id (token masking and text infilling).
        sentence_end_id: the id that ends every sentence (sentence permutation).
        noises: names from `NOISES`, each at most once; `()` returns `ids` unchanged.
        mask_ratio: fraction of tokens masked by `token_masking` and by `text_infilling`.
        poisson_lambda: mean span length of `text_infilling`.
        deletion_ratio: fraction of tokens dropped by `token_deletion`.

    Returns:
        The noised 1-D ids, of the dtype of `ids`.

    Example:

    >>> ids = tf.constant([10, 11, 5, 12, 13, 14, 5])  # two sentences, each ended by 5
    >>> noised = denoise(ids, seed=[0, 1], mask_id=4, sentence_end_id=5, noises=["token_masking"],
    ...                  mask_ratio=1.0)
    >>> noised.numpy().tolist()
    [4, 4, 4, 4, 4, 4, 4]
    """
    noises = check_noise_options(noises, mask_ratio, poisson_lambda, deletion_ratio)
    transforms = {
        "sentence_permutation": lambda x, s: sentence_permutation(x, sentence_end_id, seed=s),
        "document_rotation": lambda x, s: document_rotation(x, seed=s),
        "token_deletion": lambda x, s: token_deletion(x, rate=deletion_ratio, seed=s),
        "token_masking": lambda x, s: token_masking(x, mask_id, rate=mask_ratio, seed=s),
        "text_infilling": lambda x, s: text_infilling(
            x, mask_id, rate=mask_ratio, poisson_lambda=poisson_lambda, seed=s
        ),
    }
    ids = tf.convert_to_tensor(ids)
    # int64, so that a seed given as int32 or as Python ints draws as `noise_dataset`'s seeds do.
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), len(NOISES))
    for position, name in enumerate(NOISES):
        if name in noises:
            ids = transforms[name](ids, seeds[position])
    return ids
