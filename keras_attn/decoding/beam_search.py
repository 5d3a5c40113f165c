"""Beam search with the GNMT length penalty over the step contract, inside the graph."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.decoding.result import DecodingResult
from keras_attn.decoding.search_loop import StepFn, allowed_tokens, write_attention, write_column


def length_penalty_factor(lengths, alpha):
    """GNMT's `lp(Y) = ((5 + |Y|) / 6) ** alpha` (Wu et al., 2016, eq. 14), float32."""
    return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, alpha)


def _tile(x, beam_size: int):
    """`(batch, ...) -> (batch * beam_size, ...)`, each row repeated `beam_size` times in place."""
    x = ops.convert_to_tensor(x)
    return x if len(x.shape) == 0 else ops.repeat(x, beam_size, axis=0)


def _gather(x, rows):
    """Rows `rows` of every tensor in `x`; scalars pass through."""
    return x if len(x.shape) == 0 else ops.take(x, rows, axis=0)


@keras_attn_export("keras_attn.decoding.beam_search")
def beam_search(
    step_fn: StepFn,
    initial_state: dict,
    batch_size,
    start_id: int,
    end_id: int,
    max_length,
    beam_size: int = 4,
    length_penalty=0.0,
    pad_id: int = 0,
    return_all_beams: bool = False,
    length_limit=None,
) -> DecodingResult:
    """Keep the `beam_size` best hypotheses per sentence, ranked with the GNMT length penalty.

    Hypotheses are ranked by `log P(Y) / lp(Y)` with `lp(Y) = ((5 + |Y|) / 6) ** alpha`
    (alpha = `length_penalty`; 0 ranks by the plain log-probability), where `|Y|` counts the
    generated tokens END included (the tokens whose log-probabilities `log P(Y)` sums).

    Every step scores the `beam_size * V` one-token extensions of the beam and keeps the best
    `beam_size` of them. A finished hypothesis (one that produced END) is frozen: its only
    extension is PAD at zero cost, so it keeps its score and its length and competes for a slot
    with the live ones. PAD and START are never generated (the rule of `greedy_search`).

    The state is any nested dict/tuple/list of tensors with the batch on axis 0 (scalars pass
    through untouched): it is tiled to `batch * beam_size` rows and every step each row takes the
    state of the hypothesis it extends, the `"attention"` entry and the alignment history
    included. `step_fn` therefore sees a batch of `batch * beam_size` (sentence-major).

    Early stop (per sentence; the loop ends when every sentence is done or at `max_length`):
    - `return_all_beams=False`: the best hypothesis is finished and no live hypothesis can reach
      its score any more. A live hypothesis' final score is bounded by
      `cum / max(lp(|Y| + 1), lp(max_length))` (log-probabilities only decrease), so the returned
      hypothesis is exactly the one decoding on to `max_length` would return.
    - `return_all_beams=True`: all `beam_size` hypotheses are finished (then no later step can
      change them).
    At `max_length` unfinished hypotheses are ranked with the finished ones as they are. Where
    fewer than `beam_size` extensions have a finite score (a vocabulary of fewer than
    `beam_size + 2` tokens), the missing hypotheses are filler with score -inf, ranked last.

    Runs in one `keras.ops.while_loop` (a `tf.while_loop` under TensorFlow), so it exports in a
    SavedModel. Logits are cast to float32 before the log-softmax.

    Args:
        step_fn: `step_fn(token_ids (n,) int32, state) -> (logits (n, V), state)`.
        initial_state: the state after encoding the source, batch-major.
        batch_size: scalar (int or tensor).
        start_id, end_id, pad_id: special token ids.
        max_length: the most tokens generated per hypothesis (int or scalar tensor), END included.
        beam_size: hypotheses kept per sentence (Python int >= 1); 1 is greedy search.
        length_penalty: alpha (float or scalar tensor).
        return_all_beams: also return the other hypotheses (see Returns).
        length_limit: a scalar (int or tensor) <= `max_length` that takes the place of
            `max_length` as the most tokens per hypothesis (loop end and early-stop bound; None:
            `max_length`), while the outputs keep `max_length` columns, PAD past the limit: the
            shapes an XLA-compiled caller (`tf.function(jit_compile=True)`) compiles for then do
            not depend on the limit.

    Returns:
        A `DecodingResult` whose `scores` are the hypotheses' log-probabilities `log P(Y)` (sum
        of token log-probabilities, END included, not length-normalised; the ranking uses the
        normalised score). With `return_all_beams=False`: the best hypothesis per sentence,
        `ids` `(batch, max_length)`, `lengths`, `scores` `(batch,)`, `alignments`
        `(batch, max_length, T_x)`. With `return_all_beams=True`: every hypothesis, best first,
        with a beam axis after the batch: `ids` `(batch, beam_size, max_length)`, `lengths` and
        `scores` `(batch, beam_size)`, `alignments` `(batch, beam_size, max_length, T_x)`.
        `alignments` is None when the state carries no `"attention"` entry.

    Raises:
        ValueError: `beam_size` is not a positive integer.

    References:
        Wu et al., 2016, Google's Neural Machine Translation System, arXiv:1609.08144 (sec. 7).
    """
    if not isinstance(beam_size, int) or isinstance(beam_size, bool) or beam_size < 1:
        raise ValueError(
            f"Expected beam_size to be a positive int. Received: beam_size={beam_size!r}"
        )
    beams = batch_size * beam_size
    limit = max_length if length_limit is None else length_limit
    with_alignment = isinstance(initial_state, dict) and "attention" in initial_state
    state = keras.tree.map_structure(lambda x: _tile(x, beam_size), initial_state)
    alpha = ops.cast(length_penalty, "float32")
    # Only the first copy of each sentence is live at step 0, so the first top-k sees each
    # extension once.
    first = ops.convert_to_tensor([0.0] + [float("-inf")] * (beam_size - 1), "float32")
    loop_vars = {
        "t": ops.convert_to_tensor(0, dtype="int32"),
        "tokens": ops.full((beams,), start_id, dtype="int32"),
        "log_probs": ops.tile(first, (batch_size,)),  # (beams,) log P(Y)
        "finished": ops.zeros((beams,), dtype="bool"),
        "steps": ops.zeros((beams,), dtype="int32"),  # |Y|, END included
        "done": ops.zeros((batch_size,), dtype="bool"),
        "ids": ops.full((beams, max_length), pad_id, dtype="int32"),
        "state": state,
    }
    if with_alignment:
        source_length = ops.shape(initial_state["attention"])[-1]
        loop_vars["alignments"] = ops.zeros((beams, max_length, source_length), "float32")

    def cond(v):
        return ops.logical_and(v["t"] < limit, ops.logical_not(ops.all(v["done"])))

    def body(v):
        logits, state = step_fn(v["tokens"], v["state"])
        step_log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)  # (beams, V)
        vocab_size = ops.shape(step_log_probs)[-1]
        allowed = allowed_tokens(vocab_size, start_id, pad_id)
        pad_only = ops.where(ops.equal(ops.arange(vocab_size), pad_id), 0.0, float("-inf"))  # (V,)
        finished = ops.expand_dims(v["finished"], -1)
        step_log_probs = ops.where(
            finished, pad_only, ops.where(allowed, step_log_probs, float("-inf"))
        )
        total = ops.expand_dims(v["log_probs"], -1) + step_log_probs  # (beams, V)
        steps = v["steps"] + ops.cast(ops.logical_not(v["finished"]), "int32")
        ranking = total / ops.expand_dims(length_penalty_factor(steps, alpha), -1)
        ranking = ops.reshape(ranking, (batch_size, beam_size * vocab_size))
        best, flat_index = ops.top_k(ranking, beam_size)  # (batch, K), best first
        flat_index = ops.cast(flat_index, "int32")
        tokens = ops.reshape(flat_index % vocab_size, (-1,))  # (beams,)
        parents = ops.reshape(
            flat_index // vocab_size + ops.expand_dims(ops.arange(batch_size) * beam_size, -1),
            (-1,),
        )  # (beams,): the row each new hypothesis extends
        log_probs = ops.take(ops.reshape(total, (-1,)), parents * vocab_size + tokens)
        was_finished = ops.take(v["finished"], parents)
        finished = ops.logical_or(was_finished, ops.equal(tokens, end_id))
        steps = ops.take(steps, parents)
        state = keras.tree.map_structure(lambda x: _gather(x, parents), state)
        new = {
            "t": v["t"] + 1,
            "tokens": tokens,
            "log_probs": log_probs,
            "finished": finished,
            "steps": steps,
            "ids": write_column(ops.take(v["ids"], parents, axis=0), v["t"], max_length, tokens),
            "state": state,
        }
        if with_alignment:
            alignments = ops.take(v["alignments"], parents, axis=0)
            new["alignments"] = write_attention(alignments, v["t"], max_length, state, was_finished)
        finished = ops.reshape(finished, (batch_size, beam_size))
        if return_all_beams:
            new["done"] = ops.all(finished, axis=-1)
        else:
            bound = ops.reshape(log_probs, (batch_size, beam_size)) / ops.maximum(
                length_penalty_factor(ops.reshape(steps, (batch_size, beam_size)) + 1, alpha),
                length_penalty_factor(limit, alpha),
            )
            bound = ops.max(ops.where(finished, float("-inf"), bound), axis=-1)
            # `best` is sorted, so its max is `best[:, 0]`; reading all k values keeps the top-k
            # values and indices sliced alike, which XLA on CPU needs to lower top_k to its TopK
            # kernel: with `best[:, 0]` it sorts all beam_size * V scores every step.
            new["done"] = ops.logical_and(finished[:, 0], bound <= ops.max(best, axis=-1))
        return new

    v = ops.while_loop(cond, body, loop_vars)
    finished = v["finished"]
    lengths = v["steps"] - ops.cast(finished, "int32")  # END is not counted
    result = DecodingResult(
        ids=ops.reshape(v["ids"], (batch_size, beam_size, -1)),
        lengths=ops.reshape(lengths, (batch_size, beam_size)),
        scores=ops.reshape(v["log_probs"], (batch_size, beam_size)),
        alignments=(
            ops.reshape(
                v["alignments"], (batch_size, beam_size, -1, ops.shape(v["alignments"])[-1])
            )
            if with_alignment
            else None
        ),
    )
    if return_all_beams:
        return result
    return DecodingResult(
        ids=result.ids[:, 0],
        lengths=result.lengths[:, 0],
        scores=result.scores[:, 0],
        alignments=None if result.alignments is None else result.alignments[:, 0],
    )
