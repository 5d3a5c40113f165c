"""Greedy search over the step contract, inside the graph."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.decoding.result import DecodingResult
from keras_attn.decoding.search_loop import StepFn, decode_one_path


@keras_attn_export("keras_attn.decoding.greedy_search")
def greedy_search(
    step_fn: StepFn,
    initial_state: dict,
    batch_size,
    start_id: int,
    end_id: int,
    max_length,
    pad_id: int = 0,
    length_limit=None,
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
        length_limit: a scalar (int or tensor) <= `max_length` at which decoding stops instead
            (None: `max_length`). The outputs keep `max_length` columns, PAD past the limit, so
            their shapes do not depend on the limit: an XLA-compiled caller
            (`tf.function(jit_compile=True)`) then compiles once for every limit.

    Returns:
        A `DecodingResult`; `ids` is `(batch, max_length)`.
    """

    def choose(t, logits):
        return ops.argmax(logits, axis=-1)

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
