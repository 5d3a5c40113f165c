"""What the exported translator, captioner and generator share: the configured search and the
string outputs they build from its `DecodingResult`."""

from __future__ import annotations

import tensorflow as tf

from keras_attn.decoding import DecodingResult, beam_search, greedy_search
from keras_attn.errors import ConfigError

DECODERS = ("greedy", "beam")


def check_decoder(decoder: str) -> None:
    """Raise a `ConfigError` unless `decoder` is one of `DECODERS`."""
    if decoder not in DECODERS:
        raise ConfigError(
            f"Expected decoder in {DECODERS}. Received: decoder={decoder!r}", ["decoder"]
        )


class ConfiguredSearch:
    """The search of a module decoding greedily or with beam search, as configured: a mixin for
    a `tf.Module` with a step view `_steps` and the attributes `decoder`, `beam_size` and
    `length_penalty`."""

    def decoding_description(self) -> dict:
        """How the module decodes, as `keras-attn export` records it beside the SavedModel
        (`keras_attn.formats.EXPORT_DESCRIPTION_FILENAME`)."""
        description = {"decoder": self.decoder}
        if self.decoder == "beam":
            description.update(beam_size=self.beam_size, length_penalty=self.length_penalty)
        description["jit_compile"] = bool(getattr(self, "jit_compile", False))
        return description

    def _run_search(
        self, state, batch_size, tokenizer, max_length, length_limit=None
    ) -> DecodingResult:
        """`beam_search` for `decoder="beam"`, else `greedy_search`, over `_steps.step` from
        `state`, with the special ids of `tokenizer` (the target's)."""
        tokens = dict(start_id=tokenizer.start_id, end_id=tokenizer.end_id, pad_id=tokenizer.pad_id)
        limit = dict(max_length=max_length, length_limit=length_limit)
        if self.decoder == "beam":
            return beam_search(
                self._steps.step,
                state,
                batch_size,
                beam_size=self.beam_size,
                length_penalty=self.length_penalty,
                **limit,
                **tokens,
            )
        return greedy_search(self._steps.step, state, batch_size, **limit, **tokens)


def trim_ids(result, pad_id: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`(ids, lengths, width)`: `result.ids` cut to the longest length, `pad_id` past each row's
    length; `ids` `(batch, width)` int32, `lengths` `(batch,)` int32, `width` a scalar."""
    lengths = tf.cast(result.lengths, tf.int32)
    width = tf.reduce_max(tf.concat([lengths, [0]], axis=0))
    keep = tf.sequence_mask(lengths, width)
    ids = tf.where(keep, result.ids[:, :width], pad_id)
    return ids, lengths, width


def string_outputs(text_key: str, tokenizer, ids: tf.Tensor, scores: tf.Tensor) -> dict:
    """`{text_key: detokenized ids (batch,), "tokens": (batch, width), "scores": float32}`."""
    return {
        text_key: tokenizer.detokenize(ids),
        "tokens": tokenizer.id_to_token(ids),
        "scores": tf.cast(scores, tf.float32),
    }
