"""The token-by-token loop greedy search and sampling share; the strategies differ in `choose`."""

from __future__ import annotations

from collections.abc import Callable

from keras import ops

from keras_attn.decoding.result import DecodingResult

StepFn = Callable[[object, dict], tuple[object, dict]]
# choose(t, logits (batch, V) float32 with PAD/START already at -inf) -> token ids (batch,) int32
ChooseFn = Callable[[object, object], object]


def write_column(history, t, max_length, values):
    """`history[:, t] = values` for `history` `(batch, max_length, ...)`, written with a one-hot."""
    column = ops.one_hot(t, max_length, dtype=history.dtype)  # (max_length,)
    column = ops.reshape(column, (1, -1) + (1,) * (len(history.shape) - 2))
    return history * (1 - column) + ops.expand_dims(values, 1) * column


def write_attention(alignments, t, max_length, state: dict, finished):
    """`alignments[:, t] = state["attention"]` (float32), a zero row where `finished` (the
    sentence or hypothesis had ended before this step)."""
    attention = ops.cast(state["attention"], "float32")  # (batch, T_x)
    attention = ops.where(ops.expand_dims(finished, -1), 0.0, attention)
    return write_column(alignments, t, max_length, attention)


def allowed_tokens(vocab_size, start_id: int, pad_id: int):
    """Bool `(V,)`: every token except PAD and START (neither is ever generated)."""
    vocab = ops.arange(vocab_size, dtype="int32")
    return ops.logical_and(ops.not_equal(vocab, pad_id), ops.not_equal(vocab, start_id))


def decode_one_path(
    step_fn: StepFn,
    initial_state: dict,
    batch_size,
    start_id: int,
    end_id: int,
    max_length,
    pad_id: int,
    choose: ChooseFn,
    length_limit=None,
) -> DecodingResult:
    """Run one hypothesis per sentence until END or `length_limit`, in one `ops.while_loop`.

    The outputs have `max_length` columns; the loop stops after `length_limit` tokens (a scalar
    no larger than `max_length`; None: `max_length`), past which every column holds `pad_id`.

    At step `t` the model's logits are cast to float32, PAD and START are masked to -inf and
    `choose(t, masked_logits)` picks the next tokens. The score adds the model's own
    log-probability of the chosen token (log-softmax of the unmasked logits). A finished sentence
    only receives PAD, at zero cost and with a zero alignment row.
    """
    with_alignment = "attention" in initial_state
    limit = max_length if length_limit is None else length_limit
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
        return ops.logical_and(t < limit, ops.logical_not(ops.all(finished)))

    def body(t, tokens, finished, lengths, scores, ids, alignments, state):
        logits, state = step_fn(tokens, state)
        logits = ops.cast(logits, "float32")  # (batch, V)
        log_probs = ops.log_softmax(logits, axis=-1)
        allowed = allowed_tokens(ops.shape(logits)[-1], start_id, pad_id)
        next_tokens = ops.cast(choose(t, ops.where(allowed, logits, float("-inf"))), "int32")
        token_scores = ops.take_along_axis(log_probs, ops.expand_dims(next_tokens, -1), axis=-1)
        next_tokens = ops.where(finished, pad_id, next_tokens)
        scores = scores + ops.where(finished, 0.0, token_scores[:, 0])
        is_end = ops.equal(next_tokens, end_id)
        lengths = lengths + ops.cast(ops.logical_not(ops.logical_or(finished, is_end)), "int32")
        ids = write_column(ids, t, max_length, next_tokens)
        if with_alignment:
            alignments = write_attention(alignments, t, max_length, state, finished)
        finished = ops.logical_or(finished, is_end)
        return t + 1, next_tokens, finished, lengths, scores, ids, alignments, state

    _, _, _, lengths, scores, ids, alignments, _ = ops.while_loop(cond, body, loop_vars)
    return DecodingResult(
        ids=ids,
        lengths=lengths,
        scores=scores,
        alignments=alignments if with_alignment else None,
    )
