"""Shape buckets of a compiled (XLA) export: pad a batch of ids up to a few fixed shapes.

XLA compiles a function once per input shape. A compiled export therefore pads the token ids
of every request up to the smallest bucket that holds them — the batch size up to a batch
bucket, the source length up to a length bucket — runs the compiled decoding loop on that
shape and cuts the outputs back to the request's own rows and source positions. A server then
compiles `len(batch_buckets) * len(length_buckets)` executables, all of them during the
warm-up of the version (`keras_attn.export.warmup.bucket_warmup_feeds`).

Padded rows copy the batch's first sentence (so they end when it does and add no decoding
steps); padded positions hold the padding id, which the models mask.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from keras_attn.errors import ConfigError

# Every bucket is one XLA compilation while a version loads, about 2-3 s of CPU each for a small
# translator whatever its shape, so the defaults are few: 3 batch x 3 length buckets load a
# compiled Transformer in about 30 s on 2 cores, where 6 x 5 took 76 s. Sized for the shipped
# serving/batching_parameters.txt (max_batch_size 32): every batch the batcher forms has a bucket,
# and the batches of up to 8 concurrent callers fit the middle one.
DEFAULT_BATCH_BUCKETS = (1, 8, 32)
# Length buckets below the longest source: powers of two from this one up to half the longest.
SMALLEST_LENGTH_BUCKET = 16


def _ascending(values: Sequence[int], argument: str) -> tuple[int, ...]:
    """`values` as a tuple of strictly increasing positive ints; a ValueError naming it if not."""
    values = tuple(values)
    if not values:
        raise ValueError(f"Expected at least one bucket. Received: {argument}={values!r}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"Expected positive integer buckets. Received: {argument}={values!r}")
    if any(b <= a for a, b in zip(values, values[1:], strict=False)):
        raise ValueError(f"Expected strictly increasing buckets. Received: {argument}={values!r}")
    return values


def batch_buckets(values: Sequence[int] = DEFAULT_BATCH_BUCKETS) -> tuple[int, ...]:
    """The validated batch buckets: strictly increasing positive ints.

    Raises:
        ValueError: empty, not positive integers, or not strictly increasing.
    """
    return _ascending(values, "batch_buckets")


def default_length_buckets(max_length: int) -> tuple[int, ...]:
    """Powers of two from 16 up to half of `max_length`, then `max_length`.

    `(16, 32, 80)` for 80, `(16, 50)` for 50, `(16, 32, 64, 128)` for 128, `(10,)` for 10. Few
    buckets, as each is a compilation; sources longer than the last power of two pay for it by
    running at `max_length`.
    """
    buckets, size = [], SMALLEST_LENGTH_BUCKET
    while 2 * size <= max_length:
        buckets.append(size)
        size *= 2
    return (*buckets, max_length)


def length_buckets(values: Sequence[int] | None, max_length: int) -> tuple[int, ...]:
    """The validated source-length buckets for sources cut to `max_length` tokens.

    `max_length` is always the last bucket (appended when `values` stops short of it), so every
    source the front end keeps has a bucket and longer sources are cut where the plain export
    cuts them. None: `default_length_buckets(max_length)`.

    Raises:
        ValueError: not strictly increasing positive ints, or a bucket above `max_length`.
    """
    if values is None:
        return default_length_buckets(max_length)
    values = _ascending(values, "length_buckets")
    if values[-1] > max_length:
        raise ValueError(
            f"Expected length buckets of at most the {max_length} tokens the export keeps "
            f"per sentence. Received: length_buckets={values!r}"
        )
    return values if values[-1] == max_length else (*values, max_length)


def validated(
    jit_compile: bool,
    batch_sizes: Sequence[int] | None,
    lengths: Sequence[int] | None,
    max_length: int,
) -> tuple[tuple[int, ...], tuple[int, ...]] | tuple[None, None]:
    """The `(batch_buckets, length_buckets)` of an export: validated and defaulted when
    `jit_compile`, `(None, None)` for an uncompiled one.

    Raises:
        keras_attn.errors.ConfigError: buckets given without `jit_compile`, or bad buckets.
    """
    if not jit_compile:
        given = [
            name
            for name, value in (("batch_buckets", batch_sizes), ("length_buckets", lengths))
            if value is not None
        ]
        if given:
            raise ConfigError(
                f"{', '.join(given)} only apply to jit_compile", [*given, "jit_compile"]
            )
        return None, None
    try:
        checked_batch = batch_buckets(DEFAULT_BATCH_BUCKETS if batch_sizes is None else batch_sizes)
    except ValueError as error:
        raise ConfigError(str(error), ["batch_buckets"]) from None
    try:
        return checked_batch, length_buckets(lengths, max_length)
    except ValueError as error:
        raise ConfigError(str(error), ["length_buckets"]) from None


def parse_buckets(text: str, argument: str) -> tuple[int, ...]:
    """`"1,2,4"` -> `(1, 2, 4)` for a command-line flag; a ValueError naming `argument` if not."""
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(
            f"Expected comma-separated integers. Received: {argument}={text!r}"
        ) from None
    return _ascending(values, argument)


def bucket_of(size: tf.Tensor, buckets: Sequence[int]) -> tf.Tensor:
    """The smallest of `buckets` (ascending) that is >= `size`, int32; the last one beyond."""
    table = tf.constant(buckets, tf.int32)
    index = tf.searchsorted(table, tf.reshape(tf.cast(size, tf.int32), [1]), side="left")[0]
    return table[tf.minimum(index, len(buckets) - 1)]


def compile_padded(function, *scalar_specs: tf.TensorSpec):
    """`function(ids, *scalars)` as one XLA-compiled `tf.function(jit_compile=True)` on int32 ids
    `(batch, length)` padded to a bucket (`pad_to_buckets`), then scalars of `scalar_specs`."""
    return tf.function(
        function,
        jit_compile=True,
        autograph=False,
        input_signature=[tf.TensorSpec([None, None], tf.int32), *scalar_specs],
    )


def pad_to_buckets(
    ids: tf.Tensor, batch_sizes: Sequence[int], lengths: Sequence[int], pad_id: int
) -> tf.Tensor:
    """Pad int ids `(batch, T)` to `(B, L)`: the smallest batch and length buckets that hold them.

    Rows `batch..B` copy row 0 (rows of `pad_id` for an empty batch); columns `T..L` hold
    `pad_id`. Sources longer than the last length bucket are cut to it.

    Raises:
        tf.errors.InvalidArgumentError: (when run) a batch larger than the last batch bucket.
    """
    batch = tf.shape(ids)[0]
    check = tf.debugging.assert_less_equal(
        batch,
        batch_sizes[-1],
        message=f"the batch holds more sentences than the largest batch bucket ({batch_sizes[-1]})"
        " of this compiled export; send at most that many per request",
    )
    with tf.control_dependencies([check]):
        ids = ids[:, : lengths[-1]]
    rows, columns = bucket_of(batch, batch_sizes), bucket_of(tf.shape(ids)[1], lengths)
    # One row of `pad_id` below the batch: row 0 is then the first sentence, or that padding row
    # for an empty batch, and every extra row copies it.
    ids = tf.pad(ids, [[0, 1], [0, columns - tf.shape(ids)[1]]], constant_values=pad_id)
    return tf.gather(ids, tf.where(tf.range(rows) < batch, tf.range(rows), 0))
