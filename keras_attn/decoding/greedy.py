"""Greedy search over the step contract, inside the graph."""

from __future__ import annotations

from collections.abc import Callable

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.decoding.result import DecodingResult

StepFn = Callable[[object, dict], tuple[object, dict]]


@keras_attn_export("keras_attn.decoding.greedy_search")
def greedy_search(
    step_fn: StepFn,
    initial_state: dict,
    batch_size,
    start_id: int,
    end_id: int,
    max_length,
    pad_id: int = 0,
) -> DecodingResult:
    """Pick the most probable token at every step until END or `max_length`.

    The step contract: `step_fn(token_ids (batch,) int32, state) -> (logits (batch, V), state)`,
    where `state` is a dict of tensors whose shapes do not change from step to step. When the
    state has an `"attention"` entry `(batch, T_x)`, it is collected into `alignments`.

    PAD and START are never chosen; `scores` are the model's own log-probabilities of the chosen
    tokens (not renormalised over the remaining vocabulary).

    Runs in one `keras.ops.while_loop` (a `tf.while_loop` under TensorFlow), so it exports inside
    a SavedModel; the loop stops as soon as every sentence has produced END. Logits are cast to
    float32 before the log-softmax.

    Args:
        step_fn: the model's step function.
        initial_state: the state after encoding the source.
        batch_size: scalar (int or tensor).
        start_id, end_id, pad_id: special token ids.
        max_length: the most tokens generated per sentence (int or scalar tensor), END included.

    Returns:
        A `DecodingResult`; `ids` is `(batch, max_length)`.
    """
    with_alignment = "attention" in initial_state
    ids = ops.full((batch_size, max_length), pad_id, dtype="int32")
    alignments = (
        ops.zeros((batch_size, max_length, ops.shape(initial_state["attention"])[-1]), "float32")
        if with_alignment
        else ops.zeros((batch_size, 0, 0), "float32")
    )
    loop_vars = (
        ops.convert_to_tensor(0, dtype="int32"),
        ops.full((batch_size,), start_id, dtype="int32"),
        ops.zeros((batch_size,), dtype="bool"),
        ops.zeros((batch_size,), dtype="int32"),
        ops.zeros((batch_size,), dtype="float32"),
        ids,
        alignments,
        initial_state,
    )

    def cond(t, tokens, finished, lengths, scores, ids, alignments, state):
        return ops.logical_and(t < max_length, ops.logical_not(ops.all(finished)))

    def body(t, tokens, finished, lengths, scores, ids, alignments, state):
        logits, state = step_fn(tokens, state)
        log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)  # (batch, V)
        vocab = ops.arange(ops.shape(log_probs)[-1], dtype="int32")
        allowed = ops.logical_and(ops.not_equal(vocab, pad_id), ops.not_equal(vocab, start_id))
        choosable = ops.where(allowed, log_probs, float("-inf"))  # PAD, START never generated
        next_tokens = ops.cast(ops.argmax(choosable, axis=-1), "int32")
        token_scores = ops.take_along_axis(log_probs, ops.expand_dims(next_tokens, -1), axis=-1)
        next_tokens = ops.where(finished, pad_id, next_tokens)
        scores = scores + ops.where(finished, 0.0, token_scores[:, 0])
        is_end = ops.equal(next_tokens, end_id)
        lengths = lengths + ops.cast(ops.logical_not(ops.logical_or(finished, is_end)), "int32")
        # Write column t: (batch, 1) * one-hot (max_length,) -> (batch, max_length)
        column = ops.cast(ops.one_hot(t, max_length), "int32")
        ids = ids * (1 - column) + ops.expand_dims(next_tokens, -1) * column
        if with_alignment:
            attention = ops.cast(state["attention"], "float32")
            attention = ops.where(ops.expand_dims(finished, -1), 0.0, attention)
            alignments = alignments + ops.expand_dims(attention, 1) * ops.reshape(
                ops.cast(column, "float32"), (1, -1, 1)
            )
        finished = ops.logical_or(finished, is_end)
        return t + 1, next_tokens, finished, lengths, scores, ids, alignments, state

    _, _, _, lengths, scores, ids, alignments, _ = ops.while_loop(cond, body, loop_vars)
    return DecodingResult(
        ids=ids,
        lengths=lengths,
        scores=scores,
        alignments=alignments if with_alignment else None,
    )
