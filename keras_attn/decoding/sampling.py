"""Random sampling with temperature, top-k and top-p (nucleus) filtering, inside the graph.

Randomness comes from TensorFlow's stateless ops (`tf.random.stateless_categorical`) keyed by a
seed tensor: `keras.random` (3.15) accepts only Python ints and `SeedGenerator`s as seeds, and a
served `generate` signature needs the seed as an input tensor.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.decoding.result import DecodingResult
from keras_attn.decoding.search_loop import StepFn, decode_one_path


@keras_attn_export("keras_attn.decoding.filter_logits")
def filter_logits(logits, temperature=1.0, top_k=0, top_p=1.0):
    """Logits of the distribution `sample` draws from: temperature, then top-k, then top-p.

    `logits / temperature`; then every token below the k-th largest logit is set to -inf
    (`top_k <= 0` or `>= V` keeps all; ties with the k-th value are kept); then, on the softmax
    of what is left, the nucleus is kept: the most probable tokens, in decreasing order, up to
    and including the first one at which the cumulative probability reaches `top_p` (the most
    probable token is always kept; `top_p >= 1` keeps all; ties with the last kept value are
    kept). Tokens already at -inf stay there.

    Args:
        logits: `(batch, V)`, cast to float32.
        temperature: scalar > 0 (float or tensor).
        top_k: scalar int (int or tensor).
        top_p: scalar in (0, 1] (float or tensor).

    Returns:
        float32 `(batch, V)`: the filtered logits (-inf outside the kept set).

    Example:

    >>> import numpy as np
    >>> logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]], "float32"))
    >>> kept = filter_logits(logits, top_p=0.75)
    >>> np.isfinite(keras.ops.convert_to_numpy(kept)).tolist()
    [[True, True, False, False]]
    """
    logits = ops.cast(logits, "float32") / ops.cast(temperature, "float32")
    vocab_size = ops.shape(logits)[-1]
    descending = ops.flip(ops.sort(logits, axis=-1), axis=-1)  # (batch, V), largest first
    k = ops.cast(top_k, "int32")
    k = ops.where(ops.logical_or(k <= 0, k > vocab_size), vocab_size, k)
    kth = ops.take(descending, ops.expand_dims(k - 1, 0), axis=-1)  # (batch, 1)
    logits = ops.where(logits < kth, float("-inf"), logits)
    descending = ops.where(descending < kth, float("-inf"), descending)
    probs = ops.softmax(descending, axis=-1)
    mass_before = ops.cumsum(probs, axis=-1) - probs  # probability of the better tokens
    in_nucleus = ops.logical_or(
        mass_before < ops.cast(top_p, "float32"), ops.arange(vocab_size) == 0
    )
    threshold = ops.min(ops.where(in_nucleus, descending, float("inf")), axis=-1, keepdims=True)
    return ops.where(logits < threshold, float("-inf"), logits)


def _base_seed(seed):
    """The int64 `(2,)` seed of one call: from an int / scalar tensor / SeedGenerator, or random."""
    if isinstance(seed, keras.random.SeedGenerator):
        return tf.cast(seed.next(), tf.int64)
    if seed is None:
        return tf.random.uniform([2], maxval=tf.int64.max, dtype=tf.int64)
    return tf.stack([tf.cast(seed, tf.int64), tf.constant(0, tf.int64)])


@keras_attn_export("keras_attn.decoding.sample")
def sample(
    step_fn: StepFn,
    initial_state: dict,
    batch_size,
    start_id: int,
    end_id: int,
    max_length,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=None,
    pad_id: int = 0,
    length_limit=None,
    int32_seeds: bool = False,
) -> DecodingResult:
    """Draw every token from the model's (filtered) distribution until END or `max_length`.

    Each step draws from `softmax(filter_logits(logits, temperature, top_k, top_p))` with
    PAD and START excluded (never generated, as in `greedy_search`); `temperature <= 0` means
    greedy (argmax), the limit of temperature -> 0. `temperature`, `top_k` and `top_p` may be
    scalar tensors (e.g. signature inputs).

    Seeds: the draws are stateless functions of one base seed per call, from which a seed per
    step is derived; the same base seed gives the same output.
    - `seed=None`: a fresh random base seed at every call (a stateful `RandomUniformInt` op, so
      calls of an exported `tf.function` differ too).
    - an int or a scalar int tensor: reproducible; the seed can be a signature input.
    - a `keras.random.SeedGenerator`: the generator advances at every call, so calls differ yet
      the sequence of calls is reproducible from the generator's seed; an exported module must
      track the generator's `state` variable (assign it to a `tf.Module` attribute, or track a
      layer owning the generator with `keras.export.ExportArchive.track`).

    `scores` are the model's own log-probabilities of the drawn tokens (temperature 1, no
    filtering), summed as in `greedy_search`; `step_fn`, the state, `alignments` and stopping
    are those of `greedy_search`. Runs in one `keras.ops.while_loop`; logits cast to float32.

    Args:
        step_fn: `step_fn(token_ids (batch,) int32, state) -> (logits (batch, V), state)`.
        initial_state: the state after encoding the source.
        batch_size: scalar (int or tensor).
        start_id, end_id, pad_id: special token ids.
        max_length: the most tokens generated per sentence (int or scalar tensor), END included.
        temperature, top_k, top_p: see `filter_logits`.
        seed: None, int, scalar int tensor or `keras.random.SeedGenerator` (above).
        length_limit: stop after this many tokens (scalar <= `max_length`; None: `max_length`),
            the outputs keeping `max_length` columns, as in `greedy_search`.
        int32_seeds: draw with int32 step seeds, the only seeds XLA's `StatelessMultinomial`
            kernel takes: set it inside a `tf.function(jit_compile=True)`. The draws are then
            other (equally random) draws than with the default int64 seeds.

    Returns:
        A `DecodingResult`; `ids` is `(batch, max_length)`.

    References:
        Fan et al., 2018, Hierarchical Neural Story Generation, arXiv:1805.04833 (top-k);
        Holtzman et al., 2020, The Curious Case of Neural Text Degeneration, arXiv:1904.09751
        (top-p).
    """
    temperature = ops.cast(temperature, "float32")
    step_seeds = tf.random.stateless_uniform(
        [max_length, 2], seed=_base_seed(seed), minval=None, maxval=None, dtype=tf.int64
    )  # (max_length, 2): one independent seed per step

    def choose(t, logits):
        filtered = filter_logits(logits, ops.maximum(temperature, 1e-6), top_k, top_p)
        step_seed = step_seeds[t]
        if int32_seeds:  # the low 31 bits of each half: non-negative int32s
            step_seed = tf.cast(tf.bitwise.bitwise_and(step_seed, 0x7FFFFFFF), tf.int32)
        drawn = tf.random.stateless_categorical(filtered, 1, seed=step_seed, dtype=tf.int32)
        return ops.where(temperature > 0, drawn[:, 0], ops.argmax(logits, axis=-1))

    return decode_one_path(
        step_fn,
        initial_state,
        batch_size,
        start_id,
        end_id,
        max_length,
        pad_id,
        choose,
        length_limit=length_limit,
    )
