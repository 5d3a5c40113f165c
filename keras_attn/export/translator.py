"""The served translator: tokenize, encode, decode (greedy or beam) and detokenize in one graph."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from keras_attn.decoding import DecodingResult
from keras_attn.errors import ConfigError
from keras_attn.export import buckets
from keras_attn.export._decoded import ConfiguredSearch, check_decoder, string_outputs, trim_ids
from keras_attn.formats import MAX_OUTPUT_LENGTH

TEXT_SPEC = tf.TensorSpec([None], tf.string, name="text")


class Translator(ConfiguredSearch, tf.Module):
    """Strings in, strings out: the path the exported signatures wrap (docs/serving.md).

    text `[batch]` → source tokenizer → ids `(batch, T_x)` (truncated to `max_source_length`) →
    `steps.encode` → `greedy_search` or `beam_search` over `steps.step` → ids → target
    detokenizer → strings.

    Args:
        model: the `keras.Model` `steps` drives (tracked, so the SavedModel holds its variables).
        steps: an object with `encode(source_ids) -> state` and
            `step(token_ids, state) -> (logits, state)`, e.g.
            `keras_attn.models.RNNTranslatorSteps`, or `keras_attn.export.PrefixSteps` for any
            Keras translator. A state with an `"attention"` entry gives alignments.
        source_tokenizer, target_tokenizer: `keras_attn.text.tokenizer.WordPieceTokenizer`s.
        max_source_length: source tokens kept per sentence (the rest is cut).
        max_output_length: hard limit on generated tokens, END included.
        length_ratio, length_offset: the per-batch limit is
            `min(max_output_length, length_ratio * T_x + length_offset)`.
        decoder: `"greedy"` or `"beam"`.
        beam_size: hypotheses kept per sentence by the beam decoder.
        length_penalty: the GNMT alpha the beam decoder ranks with (`beam_search`).
        jit_compile: run the encoder and the decoding loop as one XLA-compiled function
            (`tf.function(jit_compile=True)`); tokenizing and detokenizing stay in the graph.
            The source ids are padded to a shape bucket (`keras_attn.export.buckets`) and the
            outputs cut back, so the outputs equal those of the uncompiled translator.
        batch_buckets: the batch sizes compiled for (`jit_compile` only; default
            `buckets.DEFAULT_BATCH_BUCKETS`, up to 32 sentences); a larger batch fails with
            `InvalidArgumentError`.
        length_buckets: the source lengths compiled for (`jit_compile` only; default
            `buckets.default_length_buckets(max_source_length)`); `max_source_length` is
            always the last.

    Every public method is a `tf.function` with a fixed input signature; `translate` returns
    `translation` `[batch]` string, `tokens` `[batch, L]` string (padded with ""), `scores`
    `[batch]` float32 (the sum of the token log-probabilities of the returned translation, END
    included; never length-normalised, also with the beam decoder, whose ranking alone uses the
    length penalty); `translate_with_alignment` adds `alignment` `[batch, L, T_x]` float32 (with
    the beam decoder: the returned hypothesis' own attention rows) and `source_tokens`
    `[batch, T_x]` string. It exists only where `with_alignment` is true: where the state
    `steps.encode` returns has an `"attention"` entry (checked on a two-token source when the
    translator is made).

    Raises:
        keras_attn.errors.ConfigError: an unknown `decoder`, a `beam_size` below 1, buckets
            without `jit_compile` or bad buckets; `translate_with_alignment` called where
            `with_alignment` is false.
    """

    def __init__(
        self,
        model,
        steps,
        source_tokenizer,
        target_tokenizer,
        max_source_length: int = 128,
        max_output_length: int = MAX_OUTPUT_LENGTH,
        length_ratio: float = 2.0,
        length_offset: int = 10,
        decoder: str = "greedy",
        beam_size: int = 4,
        length_penalty: float = 0.6,
        jit_compile: bool = False,
        batch_buckets: Sequence[int] | None = None,
        length_buckets: Sequence[int] | None = None,
        name: str = "translator",
    ):
        super().__init__(name=name)
        check_decoder(decoder)
        if not isinstance(beam_size, int) or beam_size < 1:
            raise ConfigError(
                f"Expected beam_size >= 1. Received: beam_size={beam_size!r}", ["beam_size"]
            )
        self.model = model
        self._steps = steps
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.max_source_length = int(max_source_length)
        self.max_output_length = int(max_output_length)
        self.length_ratio = float(length_ratio)
        self.length_offset = int(length_offset)
        self.decoder = decoder
        self.beam_size = beam_size
        self.length_penalty = float(length_penalty)
        self.jit_compile = bool(jit_compile)
        self.batch_buckets, self.length_buckets = buckets.validated(
            jit_compile, batch_buckets, length_buckets, self.max_source_length
        )
        probe = tf.fill([1, 2], self.source_tokenizer.unk_id)  # (1, 2): two unknown words
        state = steps.encode(probe)
        self.with_alignment = isinstance(state, dict) and "attention" in state
        if self.jit_compile:
            self._compiled_search = buckets.compile_padded(
                self._search, tf.TensorSpec([], tf.int32)
            )

    def _source_ids(self, text):
        ragged = self.source_tokenizer.tokenize(text)[:, : self.max_source_length]
        ids = tf.cast(ragged.to_tensor(default_value=self.source_tokenizer.pad_id), tf.int32)
        # Keep one (padded) column for an all-empty batch so every shape stays non-degenerate.
        missing = tf.maximum(1 - tf.shape(ids)[1], 0)
        return tf.pad(ids, [[0, 0], [0, missing]], constant_values=self.source_tokenizer.pad_id)

    def _decode(self, text):
        source_ids = self._source_ids(text)
        batch_size, source_length = tf.shape(source_ids)[0], tf.shape(source_ids)[1]
        max_length = tf.minimum(
            self.max_output_length,
            tf.cast(self.length_ratio * tf.cast(source_length, tf.float32), tf.int32)
            + self.length_offset,
        )
        if self.jit_compile:
            padded = buckets.pad_to_buckets(
                source_ids, self.batch_buckets, self.length_buckets, self.source_tokenizer.pad_id
            )
            result = _cut(self._compiled_search(padded, max_length), batch_size, source_length)
        else:
            result = self._search(source_ids, max_length)
        ids, lengths, width = trim_ids(result, self.target_tokenizer.pad_id)
        return source_ids, ids, lengths, result, width

    def _search(self, source_ids, max_length):
        """Encode `source_ids` and decode at most `max_length` tokens per sentence.

        Compiled, the outputs have `max_output_length` columns whatever `max_length` is, so
        one executable serves every limit.
        """
        batch_size = tf.shape(source_ids)[0]
        length_limit = None
        if self.jit_compile:
            max_length, length_limit = self.max_output_length, max_length
        state = self._steps.encode(source_ids)
        return self._run_search(state, batch_size, self.target_tokenizer, max_length, length_limit)

    def _outputs(self, ids, result):
        return string_outputs("translation", self.target_tokenizer, ids, result.scores)

    @tf.function(input_signature=[TEXT_SPEC], autograph=False)
    def translate(self, text):
        _, ids, _, result, _ = self._decode(text)
        return self._outputs(ids, result)

    @property
    def translate_with_alignment(self):
        """The `tf.function` of the `translate_with_alignment` signature (`with_alignment`)."""
        if not self.with_alignment:
            raise ConfigError(
                "translate_with_alignment needs a step view whose state has an 'attention' "
                f"entry; {type(self._steps).__name__}'s has none",
                ["steps"],
            )
        return self._translate_with_alignment

    @tf.function(input_signature=[TEXT_SPEC], autograph=False)
    def _translate_with_alignment(self, text):
        source_ids, ids, _, result, width = self._decode(text)
        outputs = self._outputs(ids, result)
        outputs["alignment"] = tf.cast(result.alignments[:, :width, :], tf.float32)
        outputs["source_tokens"] = self.source_tokenizer.id_to_token(source_ids)
        return outputs


def _cut(result: DecodingResult, batch_size, source_length) -> DecodingResult:
    """The rows of the request (`batch_size`) and, in the alignments, its source positions."""
    return DecodingResult(
        ids=result.ids[:batch_size],
        lengths=result.lengths[:batch_size],
        scores=result.scores[:batch_size],
        alignments=(
            None if result.alignments is None else result.alignments[:batch_size, :, :source_length]
        ),
    )
