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

from collections.abc import Callable

import tensorflow as tf


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
