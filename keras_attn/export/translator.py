"""The served translator: tokenize, encode, decode (greedy or beam) and detokenize in one graph."""

from __future__ import annotations

import tensorflow as tf

from keras_attn.decoding import beam_search, greedy_search
from keras_attn.errors import ConfigError
from keras_attn.export._decoded import string_outputs, trim_ids
from keras_attn.formats import MAX_OUTPUT_LENGTH

TEXT_SPEC = tf.TensorSpec([None], tf.string, name="text")
DECODERS = ("greedy", "beam")


class Translator(tf.Module):
    """Strings in, strings out: the path the exported signatures wrap (docs/serving.md).

    text `[batch]` → source tokenizer → ids `(batch, T_x)` (truncated to `max_source_length`) →
    `steps.encode` → `greedy_search` or `beam_search` over `steps.step` → ids → target
    detokenizer → strings.

    Args:
        steps: an object with `encode(source_ids) -> state` and
            `step(token_ids, state) -> (logits, state)`, e.g.
            `keras_attn.models.RNNTranslatorSteps`.
        source_tokenizer, target_tokenizer: `keras_attn.text.tokenizer.WordPieceTokenizer`s.
        max_source_length: source tokens kept per sentence (the rest is cut).
        max_output_length: hard limit on generated tokens, END included.
        length_ratio, length_offset: the per-batch limit is
            `min(max_output_length, length_ratio * T_x + length_offset)`.
        decoder: `"greedy"` or `"beam"`.
        beam_size: hypotheses kept per sentence by the beam decoder.
        length_penalty: the GNMT alpha the beam decoder ranks with (`beam_search`).

    Every public method is a `tf.function` with a fixed input signature; `translate` returns
    `translation` `[batch]` string, `tokens` `[batch, L]` string (padded with ""), `scores`
    `[batch]` float32 (the sum of the token log-probabilities of the returned translation, END
    included; never length-normalised, also with the beam decoder, whose ranking alone uses the
    length penalty); `translate_with_alignment` adds `alignment` `[batch, L, T_x]` float32 (with
    the beam decoder: the returned hypothesis' own attention rows) and `source_tokens`
    `[batch, T_x]` string.

    Raises:
        keras_attn.errors.ConfigError: an unknown `decoder` or a `beam_size` below 1.
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
        name: str = "translator",
    ):
        super().__init__(name=name)
        if decoder not in DECODERS:
            raise ConfigError(
                f"Expected decoder in {DECODERS}. Received: decoder={decoder!r}", ["decoder"]
            )
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

    def _source_ids(self, text):
        ragged = self.source_tokenizer.tokenize(text)[:, : self.max_source_length]
        ids = tf.cast(ragged.to_tensor(default_value=self.source_tokenizer.pad_id), tf.int32)
        # Keep one (padded) column for an all-empty batch so every shape stays non-degenerate.
        missing = tf.maximum(1 - tf.shape(ids)[1], 0)
        return tf.pad(ids, [[0, 0], [0, missing]], constant_values=self.source_tokenizer.pad_id)

    def _decode(self, text):
        source_ids = self._source_ids(text)
        batch_size = tf.shape(source_ids)[0]
        source_length = tf.cast(tf.shape(source_ids)[1], tf.float32)
        max_length = tf.minimum(
            self.max_output_length,
            tf.cast(self.length_ratio * source_length, tf.int32) + self.length_offset,
        )
        state = self._steps.encode(source_ids)
        tokens = dict(
            start_id=self.target_tokenizer.start_id,
            end_id=self.target_tokenizer.end_id,
            pad_id=self.target_tokenizer.pad_id,
        )
        if self.decoder == "beam":
            result = beam_search(
                self._steps.step,
                state,
                batch_size,
                max_length=max_length,
                beam_size=self.beam_size,
                length_penalty=self.length_penalty,
                **tokens,
            )
        else:
            result = greedy_search(
                self._steps.step, state, batch_size, max_length=max_length, **tokens
            )
        ids, lengths, width = trim_ids(result, self.target_tokenizer.pad_id)
        return source_ids, ids, lengths, result, width

    def _outputs(self, ids, result):
        return string_outputs("translation", self.target_tokenizer, ids, result.scores)

    @tf.function(input_signature=[TEXT_SPEC])
    def translate(self, text):
        _, ids, _, result, _ = self._decode(text)
        return self._outputs(ids, result)

    @tf.function(input_signature=[TEXT_SPEC])
    def translate_with_alignment(self, text):
        source_ids, ids, _, result, width = self._decode(text)
        outputs = self._outputs(ids, result)
        outputs["alignment"] = tf.cast(result.alignments[:, :width, :], tf.float32)
        outputs["source_tokens"] = self.source_tokenizer.id_to_token(source_ids)
        return outputs
