"""A step view for any Keras translator or language model: rerun the whole model on the prefix."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import ConfigError

OUTPUTS = ("logits", "probabilities")
# The smallest normal float32: probabilities are clipped to it before the log, so a zero
# probability becomes a large finite negative score instead of -inf.
_TINY = float(np.finfo(np.float32).tiny)
# Token ids the probes draw from start here (after [PAD], [UNK], [START], [END]).
_FIRST_WORD_ID = 4


@keras_attn_export("keras_attn.export.PrefixSteps")
class PrefixSteps:
    """The step contract over any Keras translator or language model, rerun on the prefix.

    A translator maps source ids `(batch, T_x)` and target ids `(batch, T_y)` (START then the
    tokens so far) to next-token scores `(batch, T_y, V)`; a language model
    (`language_model=True`) maps token ids `(batch, T)` (START then the text) to next-token
    scores `(batch, T, V)`. Either way the scores at position `t` may depend on the tokens up to
    `t` only. `PrefixSteps` drives the model one token at a time without knowing its layers:

    - `encode(source_ids (batch, T_x)) -> state` (a translator): the source ids and a target
      buffer of `max_length` ids holding START, then PAD.
    - `prefill(prompt_ids (batch, P)) -> state` (a language model): the prompts (START first,
      right-padded with PAD) at the start of a buffer of `max_length` ids, PAD after them.
    - `step(token_ids (batch,), state) -> (logits (batch, V) float32, state)`: the first step
      runs the model on the buffer and returns the scores after each row's last token (the token
      it is given, a decoding loop's START, is already there); every later step writes
      `token_ids` at each row's next position, reruns the model and returns the scores there
      (as log-probabilities for a model ending in a softmax).

    The state holds `token_ids` `(batch, max_length)`, `positions` `(batch,)` (where each row's
    next token goes), the scalar `started` and, for a translator, `source_ids`; it has no
    `"attention"` entry, so decoding returns no alignments. Every shape is fixed, so the view
    runs inside the decoding `while` loops and under XLA. Each step reruns the whole model on
    the full buffer: a cached step view (e.g. `keras_attn.models.RNNTranslatorSteps`,
    `keras_attn.models.GPTSteps`) is faster; this one needs nothing but the model.

    A translator's inputs are found by name or by position: `source_input` and `target_input`
    name them (a name, or a position in its input list); by default the inputs named
    `source_ids` and `target_ids`, else the first and the second of a model with two inputs. A
    model that is not functional is called with a dict when both inputs are given by name, else
    with `[source_ids, target_ids]`. A language model has one input. Ids are cast to the dtype
    each input declares (int32 or int64).

    Two probes run on construction, on short made-up sentences: one tells whether the model
    ends in a softmax (`outputs=None`: every row non-negative and summing to 1, within 1e-3),
    the other that it is causal: two sequences equal up to position `t` and different after it
    must get the same scores at positions `<= t`. `vocab_size` is the `V` they saw.

    Args:
        model: a built `keras.Model` as above.
        max_length: the columns of the buffer, START included: at least the most tokens a
            search generates (its `max_length`), plus the longest prompt for a language model.
        source_input, target_input: a translator's source and target inputs (names or
            positions; None: see above).
        outputs: `"logits"`, `"probabilities"` (a final softmax: the step returns their logs),
            or None to tell them apart with the probe.
        start_id, pad_id: START and PAD (2 and 0 with
            `keras_attn.text.tokenizer.WordPieceTokenizer`).
        source_vocab_size: the source vocabulary size, for the probes' made-up source ids
            (None: ids 4 to 7).
        language_model: the model is a language model (one input), decoded from `prefill`.

    Raises:
        keras_attn.errors.ConfigError: an unknown `outputs`, inputs that cannot be found (a
            translator without two inputs, a language model with more than one, input
            arguments given for a language model), scores that are not `(batch, T, V)`, or a
            model whose scores at a position read later tokens (a bidirectional decoder, a
            self-attention without a causal mask).

    Example:

    >>> import keras
    >>> source = keras.Input((None,), dtype="int32", name="source_ids")
    >>> target = keras.Input((None,), dtype="int32", name="target_ids")
    >>> embedded = keras.layers.Embedding(12, 4)(target)
    >>> decoded = keras.layers.LSTM(8, return_sequences=True)(embedded)
    >>> model = keras.Model([source, target], keras.layers.Dense(12)(decoded))
    >>> steps = PrefixSteps(model, max_length=6)
    >>> state = steps.encode(tf.constant([[5, 6, 7]]))
    >>> logits, state = steps.step(tf.constant([2]), state)
    >>> logits.shape, state["positions"].numpy().tolist()
    (TensorShape([1, 12]), [1])

    A language model:

    >>> tokens = keras.Input((None,), dtype="int32", name="token_ids")
    >>> hidden = keras.layers.GRU(8, return_sequences=True)(keras.layers.Embedding(12, 4)(tokens))
    >>> model = keras.Model(tokens, keras.layers.Dense(12)(hidden))
    >>> steps = PrefixSteps(model, max_length=8, language_model=True)
    >>> state = steps.prefill(tf.constant([[2, 5, 6], [2, 7, 0]]))
    >>> logits, state = steps.step(tf.constant([2, 2]), state)
    >>> logits.shape, state["positions"].numpy().tolist()
    (TensorShape([2, 12]), [3, 2])
    """

    def __init__(
        self,
        model,
        max_length: int,
        source_input: str | int | None = None,
        target_input: str | int | None = None,
        outputs: str | None = None,
        start_id: int = 2,
        pad_id: int = 0,
        source_vocab_size: int | None = None,
        language_model: bool = False,
    ):
        if outputs is not None and outputs not in OUTPUTS:
            raise ConfigError(
                f"Expected outputs in {OUTPUTS} or None. Received: outputs={outputs!r}",
                ["outputs"],
            )
        shortest = 2 if language_model else 1
        if not isinstance(max_length, int) or max_length < shortest:
            raise ConfigError(
                f"Expected max_length >= {shortest}. Received: max_length={max_length!r}",
                ["max_length"],
            )
        self.model = model
        self.max_length = max_length
        self.start_id = start_id
        self.pad_id = pad_id
        self.language_model = bool(language_model)
        if self.language_model:
            given = [name for name, value in (("source_input", source_input),
                     ("target_input", target_input)) if value is not None]  # fmt: skip
            if given:
                raise ConfigError(f"{', '.join(given)}: a language model has one input", given)
            self._inputs = _LanguageModelInput(model)
        else:
            self._inputs = _ModelInputs(model, source_input, target_input)
        probe_sources, probe_targets = _probe_batch(min(max_length, 8), source_vocab_size, start_id)
        scores = self._scores(probe_sources, probe_targets).numpy()
        self.vocab_size = int(scores.shape[-1])
        self.outputs = outputs or _kind_of(scores)
        _check_causal(scores, _tolerance(model), noun="" if self.language_model else "target ")

    def _scores(self, source_ids, token_ids):
        """The model's scores `(batch, T, V)` as float32 (`source_ids` unused by a language
        model)."""
        scores = self.model(self._inputs.feed(source_ids, token_ids), training=False)
        if not hasattr(scores, "shape") or len(scores.shape) != 3:
            axis = "T" if self.language_model else "T_y"
            raise ConfigError(
                f"Expected the model to return next-token scores of shape (batch, {axis}, V). "
                f"Received: {_describe(scores)}",
                ["model"],
            )
        return tf.cast(scores, tf.float32)

    def encode(self, source_ids) -> dict:
        if self.language_model:
            raise ConfigError(
                "a language model has no source to encode: start it with prefill(prompt_ids)",
                ["source_ids"],
            )
        source_ids = tf.convert_to_tensor(source_ids)
        batch_size = tf.shape(source_ids)[0]
        start = tf.fill([batch_size, 1], tf.constant(self.start_id, tf.int32))
        state = self._buffer(start)
        state["source_ids"] = source_ids
        return state

    def prefill(self, prompt_ids) -> dict:
        if not self.language_model:
            raise ConfigError(
                "a translator starts from its source: encode(source_ids), not prefill",
                ["prompt_ids"],
            )
        return self._buffer(tf.cast(prompt_ids, tf.int32))

    def _buffer(self, prefix_ids) -> dict:
        """The state of the (right-padded) `prefix_ids` at the start of the buffer."""
        width = tf.shape(prefix_ids)[1]
        token_ids = tf.pad(
            prefix_ids, [[0, 0], [0, self.max_length - width]], constant_values=self.pad_id
        )  # (batch, max_length)
        lengths = tf.reduce_sum(tf.cast(prefix_ids != self.pad_id, tf.int32), axis=1)
        return {
            "token_ids": token_ids,
            "positions": lengths,  # (batch,): where the next token goes
            "started": tf.constant(0, tf.int32),
        }

    def step(self, token_ids, state: dict):
        started = state["started"] > 0
        positions = state["positions"]
        columns = tf.range(self.max_length)[tf.newaxis, :]
        token_ids = tf.cast(token_ids, tf.int32)[:, tf.newaxis]  # (batch, 1)
        write = tf.logical_and(started, columns == positions[:, tf.newaxis])
        buffer = tf.where(write, token_ids, state["token_ids"])
        read = tf.where(started, positions, positions - 1)  # the first step: the last token
        scores = self._scores(state.get("source_ids"), buffer)  # (batch, max_length, V)
        scores = tf.gather(scores, read, axis=1, batch_dims=1)  # (batch, V)
        if self.outputs == "probabilities":
            scores = tf.math.log(tf.maximum(scores, _TINY))
        new_state = dict(
            state,
            token_ids=buffer,
            positions=tf.where(started, positions + 1, positions),
            started=tf.constant(1, tf.int32),
        )
        return scores, new_state


class _LanguageModelInput:
    """How to call a language model (one input) on token ids, cast to the input's dtype."""

    def __init__(self, model):
        try:
            structure = model.input
        except (AttributeError, ValueError):  # a subclassed model: called with the ids
            structure = None
        inputs = list(model.inputs) if structure is not None else []
        if len(inputs) > 1:
            raise ConfigError(
                "Expected a language model with one input (token ids). Received a model with "
                f"inputs {[tensor.name for tensor in inputs]}",
                ["model"],
            )
        self._key = next(iter(structure)) if isinstance(structure, dict) else None
        self._dtype = inputs[0].dtype if inputs else "int32"

    def feed(self, source_ids, token_ids):
        token_ids = tf.cast(token_ids, self._dtype)
        return token_ids if self._key is None else {self._key: token_ids}


class _ModelInputs:
    """Which of the model's inputs takes the source and which the target, and how to call it."""

    def __init__(self, model, source_input, target_input):
        try:
            structure = model.input
        except (AttributeError, ValueError):  # a subclassed model: no declared inputs
            structure = None
        if structure is None:
            self.names = None
            self.dtypes = {}
            source = 0 if source_input is None else source_input
            target = 1 if target_input is None else target_input
            by_name = isinstance(source, str) and isinstance(target, str)
            self.keys = (source, target) if by_name else None
            self.positions = None if by_name else (source, target)
            return
        if isinstance(structure, dict):
            self.names = list(structure)
            tensors = [structure[name] for name in self.names]
        else:
            tensors = list(model.inputs)
            self.names = [tensor.name for tensor in tensors]
        if len(self.names) != 2:
            raise ConfigError(
                f"Expected a model with two inputs (source ids and target ids). Received a model "
                f"with inputs {self.names}",
                ["model"],
            )
        self.dtypes = dict(zip(self.names, (tensor.dtype for tensor in tensors), strict=True))
        self.by_dict = isinstance(structure, dict)
        self.keys = (
            self._find(source_input, "source_input", "source_ids", 0),
            self._find(target_input, "target_input", "target_ids", 1),
        )
        if self.keys[0] == self.keys[1]:
            raise ConfigError(
                f"source_input and target_input name the same input {self.keys[0]!r}",
                ["source_input", "target_input"],
            )
        self.positions = None

    def _find(self, given, argument, default_name, default_position) -> str:
        if given is None:
            given = default_name if default_name in self.names else default_position
        if isinstance(given, int) and not isinstance(given, bool) and 0 <= given < 2:
            return self.names[given]
        if isinstance(given, str) and given in self.names:
            return given
        raise ConfigError(
            f"Expected {argument} to be one of the model's inputs {self.names} or a position "
            f"0 or 1. Received: {argument}={given!r}",
            [argument],
        )

    def feed(self, source_ids, target_ids):
        """The model's inputs for `source_ids` and `target_ids`, each cast to its dtype."""
        if self.names is None:
            values = (tf.cast(source_ids, tf.int32), tf.cast(target_ids, tf.int32))
            if self.keys is not None:
                return dict(zip(self.keys, values, strict=True))
            ordered = [None, None]
            for position, value in zip(self.positions, values, strict=True):
                ordered[position] = value
            return ordered
        values = {
            self.keys[0]: tf.cast(source_ids, self.dtypes[self.keys[0]]),
            self.keys[1]: tf.cast(target_ids, self.dtypes[self.keys[1]]),
        }
        if self.by_dict:
            return values
        return [values[name] for name in self.names]


def _probe_batch(width: int, source_vocab_size: int | None, start_id: int):
    """`(sources, targets)` int32 for the probes: row 0 a made-up target of `width` tokens, row
    `t + 1` the same up to position `t` and other tokens after it; the same source in each row."""
    random = np.random.default_rng(0)
    source_high = 8 if source_vocab_size is None else max(source_vocab_size, _FIRST_WORD_ID + 2)
    source = random.integers(_FIRST_WORD_ID, source_high, size=5)
    base = np.concatenate([[start_id], random.integers(_FIRST_WORD_ID, 8, size=width - 1)])
    rows = [base]
    for t in range(width - 1):
        changed = base.copy()
        # Later tokens differ from the base's (another id of 4..7 at every position after t).
        changed[t + 1 :] = _FIRST_WORD_ID + (base[t + 1 :] - _FIRST_WORD_ID + 1) % 4
        rows.append(changed)
    targets = np.stack(rows).astype(np.int32)
    sources = np.tile(source, (len(rows), 1)).astype(np.int32)
    return tf.constant(sources), tf.constant(targets)


def _kind_of(scores: np.ndarray) -> str:
    """`"probabilities"` when every row is non-negative and sums to 1 (within 1e-3)."""
    rows_sum_to_one = np.allclose(scores.sum(axis=-1), 1.0, rtol=0.0, atol=1e-3)
    return "probabilities" if bool(np.all(scores >= 0)) and rows_sum_to_one else "logits"


def _tolerance(model) -> float:
    """How far two equal computations may differ: float32 round-off, or that of a mixed policy."""
    compute_dtype = getattr(getattr(model, "dtype_policy", None), "compute_dtype", "float32")
    return 1e-5 if compute_dtype in ("float32", "float64") else 1e-2


def _check_causal(scores: np.ndarray, tolerance: float, noun: str = "target ") -> None:
    """Raise if the scores at a position change when only later target tokens change (row
    `t + 1` of `scores` is the model's answer to a target equal to row 0's up to position `t`)."""
    for t in range(scores.shape[1] - 1):
        kept = scores[t + 1, : t + 1]
        reference = scores[0, : t + 1]
        close = np.isclose(kept, reference, rtol=tolerance, atol=tolerance).all(axis=-1)
        if not close.all():
            position = int(np.argmin(close))
            raise ConfigError(
                f"the model reads later {noun}tokens: its scores at {noun}position {position} "
                f"change when only the tokens after position {t} change (a bidirectional "
                "decoder, or self-attention without a causal mask?), so it cannot decode one "
                "token at a time",
                ["model"],
            )


def _describe(value) -> str:
    if isinstance(value, dict):
        return f"a dict with keys {sorted(value)}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} values"
    return f"shape {tuple(value.shape)}" if hasattr(value, "shape") else type(value).__name__
