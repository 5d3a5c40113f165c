"""Random sampling with temperature, top-k and top-p (nucleus) filtering, inside the graph.

Each token is a Gumbel-max draw, `argmax(filtered_logits + gumbel_noise)`, whose uniform noise
is Threefry-2x32 (Salmon et al., 2011), the counter-based generator JAX uses by default,
written with `keras.ops` 32-bit integer arithmetic. The noise is a pure function of a seed
tensor, the step and the position, so the seed can be an input of a served signature (where
`keras.random` takes only Python ints and `SeedGenerator`s), the draws are the same on every
backend and under XLA, and no random op of one backend is needed except for `seed=None`.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.decoding.result import DecodingResult
from keras_attn.decoding.search_loop import StepFn, decode_one_path

# Threefry-2x32 with 20 rounds: the rotation distances of the two alternating groups of four
# rounds, and the key schedule's parity constant (Salmon et al., 2011, table 4).
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def _u32(value):
    return ops.convert_to_tensor(np.uint32(value), dtype="uint32")


def _wrap(x):
    """`x` modulo 2**32. PyTorch has no uint32 arithmetic: Keras holds its uint32 tensors as
    int64, where sums and left shifts leave [0, 2**32) and casts keep the sign; elsewhere uint32
    arithmetic wraps by itself."""
    if keras.backend.backend() != "torch":
        return x
    return ops.bitwise_and(x, _u32(0xFFFFFFFF))


def _as_u32(x):
    """An integer tensor's low 32 bits, as uint32."""
    return _wrap(ops.cast(x, "uint32"))


def _add(*words):
    total = words[0]
    for word in words[1:]:
        total = total + word
    return _wrap(total)


def _rotate_left(x, distance: int):
    return ops.bitwise_or(_wrap(ops.left_shift(x, distance)), ops.right_shift(x, 32 - distance))


def threefry2x32(key, counter):
    """Threefry-2x32-20 of `counter` under `key`: two uint32 words in, two uint32 words out.

    Args:
        key: a pair `(k0, k1)` of uint32 scalars (or tensors broadcastable to the counter).
        counter: a pair `(x0, x1)` of uint32 tensors of one shape.

    Returns:
        The pair of uint32 tensors `(y0, y1)`, the shape of the counter.

    References:
        Salmon et al., 2011, Parallel Random Numbers: As Easy as 1, 2, 3, SC '11.
    """
    k0, k1 = key
    schedule = (k0, k1, ops.bitwise_xor(ops.bitwise_xor(k0, k1), _u32(_PARITY)))
    x0, x1 = _add(counter[0], schedule[0]), _add(counter[1], schedule[1])
    for block in range(5):  # 5 blocks of 4 rounds, a key injection after each
        for distance in _ROTATIONS[block % 2]:
            x0 = _add(x0, x1)
            x1 = ops.bitwise_xor(_rotate_left(x1, distance), x0)
        x0 = _add(x0, schedule[(block + 1) % 3])
        x1 = _add(x1, schedule[(block + 2) % 3], _u32(block + 1))
    return x0, x1


def _seed_words(value):
    """A seed as two uint32 words: a Python int or an integer tensor modulo 2**64."""
    if isinstance(value, int):
        return _u32(value & 0xFFFFFFFF), _u32((value >> 32) & 0xFFFFFFFF)
    value = ops.convert_to_tensor(value)
    high_shift = 32 if value.dtype == "int64" else 31  # int32: the sign, extended
    return _as_u32(value), _as_u32(ops.right_shift(value, high_shift))


def _base_key(seed):
    """The key `(k0, k1)` of one call: from an int / scalar tensor / SeedGenerator, or random."""
    if isinstance(seed, keras.random.SeedGenerator):
        state = seed.next()  # (2,) [seed, counter], advanced at each call
        return _as_u32(state[0]), _as_u32(state[1])
    if seed is None:
        return _fresh_key()
    return _seed_words(seed)


def _fresh_key():
    """A random key, drawn anew at every call, also in an exported TensorFlow function."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf  # a stateful op: a SavedModel's calls differ

        words = tf.random.uniform([2], minval=tf.int32.min, maxval=tf.int32.max, dtype=tf.int32)
    else:  # Keras' global SeedGenerator (eager only under JAX: jit needs a seed)
        words = keras.random.randint([2], -(2**31), 2**31 - 1, dtype="int32")
    words = _as_u32(words)
    return words[0], words[1]


def uniform_noise(key, step, shape):
    """Uniform draws in the open interval (0, 1), float32, of `shape` `(batch, V)` at `step`.

    Element `(b, v)` is the first word of Threefry-2x32 under `key` of the counter
    `(step, b * V + v)`, its 24 high bits scaled to `(k + 0.5) / 2**24`.
    """
    positions = ops.reshape(ops.arange(shape[0] * shape[1], dtype="int32"), shape)
    counter = (_as_u32(ops.full(shape, step)), _as_u32(positions))
    bits, _ = threefry2x32(key, counter)
    mantissa = ops.cast(ops.right_shift(bits, 8), "float32")  # 24 bits: exact in float32
    return (mantissa + 0.5) * (1.0 / 2**24)


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
) -> DecodingResult:
    """Draw every token from the model's (filtered) distribution until END or `max_length`.

    Each step draws from `softmax(filter_logits(logits, temperature, top_k, top_p))` with
    PAD and START excluded (never generated, as in `greedy_search`); `temperature <= 0` means
    greedy (argmax), the limit of temperature -> 0. `temperature`, `top_k` and `top_p` may be
    scalar tensors (e.g. signature inputs).

    Seeds: the draws are pure functions of one key per call (`threefry2x32`, `uniform_noise`);
    the same key gives the same output on every backend, compiled or not.
    - `seed=None`: a fresh random key at every call (under TensorFlow a stateful
      `RandomUniformInt` op, so calls of an exported `tf.function` differ too; under JAX Keras'
      global `SeedGenerator`, eagerly only).
    - an int or a scalar int tensor (modulo 2**64): reproducible; the seed can be a signature
      input.
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

    Returns:
        A `DecodingResult`; `ids` is `(batch, max_length)`.

    References:
        Fan et al., 2018, Hierarchical Neural Story Generation, arXiv:1805.04833 (top-k);
        Holtzman et al., 2020, The Curious Case of Neural Text Degeneration, arXiv:1904.09751
        (top-p); Maddison et al., 2014, A* Sampling, arXiv:1411.0030 (the Gumbel-max draw).
    """
    temperature = ops.cast(temperature, "float32")
    key = _base_key(seed)

    def choose(t, logits):
        filtered = filter_logits(logits, ops.maximum(temperature, 1e-6), top_k, top_p)
        gumbel = -ops.log(-ops.log(uniform_noise(key, t, ops.shape(filtered))))
        drawn = ops.argmax(filtered + gumbel, axis=-1)  # Gumbel-max: a draw from the softmax
        return ops.where(temperature > 0, drawn, ops.argmax(logits, axis=-1))

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
