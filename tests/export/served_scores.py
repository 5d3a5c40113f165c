"""The check the exported-translator tests share: served scores are teacher-forced log-probs."""

import numpy as np
import tensorflow as tf


def teacher_forced_log_probs(model, tokenizers, source_tokens, tokens, limit):
    """For every served row, `(ids, log_prob)`: the target ids the row holds and the log-probability
    the teacher-forced `model` gives them, END included unless the row stopped at `limit`."""
    source_tokenizer, target_tokenizer = tokenizers
    rows = []
    for source_row, token_row in zip(source_tokens, tokens, strict=True):
        source = [source_tokenizer.vocab.index(t.decode()) for t in source_row if t]
        ids = [target_tokenizer.vocab.index(t.decode()) for t in token_row if t]
        generated = ids if len(ids) == limit else [*ids, target_tokenizer.end_id]
        inputs = {
            "source_ids": np.array([source or [0]]),
            "target_ids": np.array([[target_tokenizer.start_id, *generated[:-1]]]),
        }
        log_probs = tf.nn.log_softmax(model(inputs)).numpy()[0]
        rows.append((ids, log_probs[np.arange(len(generated)), generated].sum()))
    return rows
