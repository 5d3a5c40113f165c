"""Tokenized parallel data or sentences, and a deterministic, resumable batch plan."""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from keras_attn.errors import ConfigError


def tokenize_pairs(
    pairs: Sequence[tuple[str, str]],
    source_tokenizer,
    target_tokenizer,
    max_length: int,
    chunk: int = 4096,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Tokenize `(source, target)` pairs; targets get START … END.

    Pairs whose source has more than `max_length` tokens or whose target has more than
    `max_length` tokens plus START/END are dropped.

    Returns:
        `(sources, targets)`: lists of int32 arrays.
    """
    sources: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    start, end = target_tokenizer.start_id, target_tokenizer.end_id
    for offset in range(0, len(pairs), chunk):
        batch = pairs[offset : offset + chunk]
        source_ids = source_tokenizer.tokenize(tf.constant([s for s, _ in batch]))
        target_ids = target_tokenizer.tokenize(tf.constant([t for _, t in batch]))
        for src, tgt in zip(source_ids.to_list(), target_ids.to_list(), strict=True):
            if 0 < len(src) <= max_length and 0 < len(tgt) <= max_length:
                sources.append(np.asarray(src, np.int32))
                targets.append(np.asarray([start, *tgt, end], np.int32))
    return sources, targets


def tokenize_sentences(
    sentences: Sequence[str], tokenizer, max_length: int, chunk: int = 4096
) -> list[np.ndarray]:
    """Tokenize sentences as START … END (language-model data).

    Sentences with no token or more than `max_length` tokens (START/END not counted) are dropped.

    Returns:
        A list of int32 arrays.
    """
    sequences: list[np.ndarray] = []
    start, end = tokenizer.start_id, tokenizer.end_id
    for offset in range(0, len(sentences), chunk):
        ids = tokenizer.tokenize(tf.constant(list(sentences[offset : offset + chunk])))
        for tokens in ids.to_list():
            if 0 < len(tokens) <= max_length:
                sequences.append(np.asarray([start, *tokens, end], np.int32))
    return sequences


def pad(sequences: Sequence[np.ndarray], pad_id: int = 0) -> np.ndarray:
    """Right-pad int sequences into one `(batch, longest)` int32 array."""
    width = max(len(s) for s in sequences)
    out = np.full((len(sequences), width), pad_id, np.int32)
    for row, sequence in enumerate(sequences):
        out[row, : len(sequence)] = sequence
    return out


class BatchOrder(abc.ABC):
    """Which examples form training batch number `step`, for any step, without state.

    Each pass over the data ("data epoch") is a seeded permutation cut into pools of
    `pool_batches * batch_size` examples; each pool is sorted by length and cut into batches (so
    batches hold similar lengths and little padding), and the batch order is shuffled. A pass has
    exactly `len(lengths) // batch_size` batches, so batch `step` is a pure function of
    `(seed, step)`: resuming at step `s` continues at the same data position.

    Subclasses say how a batch's examples become `(features, labels)` (`batch`), their
    `feature_spec` and `label_spec`, and `count_labels`, the number of labels a batch's loss
    averages over (the trainer weights replicas by it).

    Args:
        lengths: each example's length (the sort key of the pools).
        batch_size: examples per batch.
        seed: data order seed.
        pool_batches: batches per length-sorted pool.
        pad_id: padding id.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        seed: int = 0,
        pool_batches: int = 50,
        pad_id: int = 0,
    ):
        if len(lengths) < batch_size:
            raise ConfigError(
                f"Need at least one batch of examples: {len(lengths)} < batch_size={batch_size}",
                ["batch_size"],
            )
        self.batch_size = batch_size
        self.seed = seed
        self.pool_batches = pool_batches
        self.pad_id = pad_id
        self.num_examples = len(lengths)
        self.batches_per_epoch = len(lengths) // batch_size
        self._lengths = np.asarray(lengths)
        self._cached_epoch: int | None = None
        self._cached_batches: list[np.ndarray] = []

    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        if epoch != self._cached_epoch:
            rng = np.random.default_rng([self.seed, epoch])
            order = rng.permutation(self.num_examples)[: self.batches_per_epoch * self.batch_size]
            pool = self.pool_batches * self.batch_size
            batches = []
            for begin in range(0, len(order), pool):
                members = order[begin : begin + pool]
                members = members[np.argsort(self._lengths[members], kind="stable")]
                batches.extend(np.split(members, len(members) // self.batch_size))
            rng.shuffle(batches)
            self._cached_epoch, self._cached_batches = epoch, batches
        return self._cached_batches

    def indices(self, step: int) -> np.ndarray:
        """Example indices of batch `step`."""
        epoch, position = divmod(step, self.batches_per_epoch)
        return self._epoch_batches(epoch)[position]

    @property
    @abc.abstractmethod
    def feature_spec(self):
        """The `TensorSpec` structure of a batch's features."""

    @property
    def label_spec(self):
        """The `TensorSpec` structure of a batch's labels (default: int32 `(batch, T)`)."""
        return tf.TensorSpec((None, None), tf.int32)

    def count_labels(self, labels) -> tf.Tensor:
        """The number of labels (float32) that the loss of a batch with `labels` averages over:
        the non-padding ones."""
        return tf.reduce_sum(tf.cast(tf.not_equal(labels, self.pad_id), tf.float32))

    @abc.abstractmethod
    def batch(self, step: int) -> tuple:
        """`(features, labels)` of batch `step`."""

    def iterate(self, start_step: int, stop_step: int) -> Iterator:
        for step in range(start_step, stop_step):
            yield self.batch(step)

    def dataset(self, start_step: int, stop_step: int) -> tf.data.Dataset:
        """A prefetched `tf.data.Dataset` of batches `start_step … stop_step - 1`."""
        signature = (self.feature_spec, self.label_spec)
        return tf.data.Dataset.from_generator(
            lambda: self.iterate(start_step, stop_step), output_signature=signature
        ).prefetch(4)


class BatchPlan(BatchOrder):
    """Teacher-forced batches of tokenized pairs (or sentences), in `BatchOrder`'s order.

    With `sources=None` (language-model data) a batch's features are the token ids themselves
    instead of `{"source_ids", "target_ids"}`.

    Args:
        sources, targets: tokenized examples (targets with START … END); `sources` may be None.
        batch_size, seed, pool_batches, pad_id: as `BatchOrder`'s (the targets' lengths order
            the pools).
    """

    def __init__(
        self,
        sources: Sequence[np.ndarray] | None,
        targets: Sequence[np.ndarray],
        batch_size: int,
        seed: int = 0,
        pool_batches: int = 50,
        pad_id: int = 0,
    ):
        super().__init__([len(t) for t in targets], batch_size, seed, pool_batches, pad_id)
        self.sources = sources
        self.targets = targets

    @property
    def feature_spec(self) -> tf.TensorSpec | dict[str, tf.TensorSpec]:
        """The `TensorSpec`(s) of a batch's features."""
        ids = tf.TensorSpec((None, None), tf.int32)
        if self.sources is None:
            return ids
        return {"source_ids": ids, "target_ids": ids}

    def batch(self, step: int) -> tuple[np.ndarray | dict[str, np.ndarray], np.ndarray]:
        """`(features, labels)` of batch `step`: teacher forcing, labels = inputs shifted by 1."""
        members = self.indices(step)
        targets = pad([self.targets[i] for i in members], self.pad_id)
        if self.sources is None:
            return targets[:, :-1], targets[:, 1:]
        features = {
            "source_ids": pad([self.sources[i] for i in members], self.pad_id),
            "target_ids": targets[:, :-1],
        }
        return features, targets[:, 1:]


class ExamplePlan(BatchOrder):
    """Batches of any examples, in `BatchOrder`'s order, made by a `collate` function.

    Args:
        lengths: each example's length.
        batch_size, seed, pool_batches, pad_id: as `BatchOrder`'s.
        collate: `collate(indices, step) -> (features, labels)` for the examples `indices` of batch
            `step` (a transform drawing random numbers seeds them with the step, so a batch is a
            pure function of `(seed, step)` as its members are).
        feature_spec, label_spec: the `TensorSpec` structures of what `collate` returns.
        count_labels: the number of labels a batch's loss averages over (default: the
            non-padding labels).
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        collate: Callable[[np.ndarray, int], tuple],
        feature_spec,
        label_spec=None,
        count_labels: Callable | None = None,
        seed: int = 0,
        pool_batches: int = 50,
        pad_id: int = 0,
    ):
        super().__init__(lengths, batch_size, seed, pool_batches, pad_id)
        self._collate = collate
        self._feature_spec = feature_spec
        self._label_spec = label_spec if label_spec is not None else super().label_spec
        self._count_labels = count_labels

    @property
    def feature_spec(self):
        return self._feature_spec

    @property
    def label_spec(self):
        return self._label_spec

    def count_labels(self, labels) -> tf.Tensor:
        if self._count_labels is None:
            return super().count_labels(labels)
        return tf.cast(self._count_labels(labels), tf.float32)

    def batch(self, step: int) -> tuple:
        return self._collate(self.indices(step), step)
