"""The string outputs the exported translator and generator build from a `DecodingResult`."""

from __future__ import annotations

import tensorflow as tf


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
