import numpy as np
import pytest
from keras import ops

from keras_attn.decoding import DecodingResult, greedy_search
from tests.lazy_tf import tf

pytestmark = pytest.mark.every_backend

PAD, START, END = 0, 2, 3


def scripted_step(table):
    """A step function replaying `table[t]`: logits (batch, V) at step t."""
    table = ops.convert_to_tensor(table, "float32")  # (T, batch, V)

    def step(tokens, state):
        t = state["t"]
        new_state = {"t": t + 1, "attention": ops.one_hot(ops.full(ops.shape(tokens), t), 3)}
        return table[t], new_state

    return step


def logits_for(choices, vocab=6):
    """Logits putting log-prob mass 0.7 on each chosen token."""
    out = np.full((len(choices), len(choices[0]), vocab), np.log(0.3 / (vocab - 1)), "float32")
    for t, row in enumerate(choices):
        for b, token in enumerate(row):
            out[t, b, token] = np.log(0.7)
    return out


def test_picks_argmax_stops_at_end_and_pads():
    # sentence 0: 4 5 END; sentence 1: 5 END (then the table says 4, ignored)
    table = logits_for([[4, 5], [5, END], [END, 4], [4, 4]])
    result = greedy_search(
        scripted_step(table),
        {"t": ops.convert_to_tensor(0), "attention": ops.zeros((2, 3))},
        2,
        START,
        END,
        max_length=4,
    )
    assert isinstance(result, DecodingResult)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(result.ids), [[4, 5, END, PAD], [5, END, PAD, PAD]]
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(result.lengths), [2, 1])
    np.testing.assert_allclose(
        ops.convert_to_numpy(result.scores), [3 * np.log(0.7), 2 * np.log(0.7)], rtol=1e-5
    )
    alignments = ops.convert_to_numpy(result.alignments)
    np.testing.assert_array_equal(alignments[1, 2:], 0.0)  # finished: no alignment recorded
    np.testing.assert_array_equal(alignments[0, :3], np.eye(3))


def test_length_limit_and_no_alignment_state():
    table = logits_for([[4, 4]] * 3)

    def step(tokens, state):
        return ops.convert_to_tensor(table)[state["t"]], {"t": state["t"] + 1}

    result = greedy_search(step, {"t": ops.convert_to_tensor(0)}, 2, START, END, max_length=3)
    np.testing.assert_array_equal(ops.convert_to_numpy(result.ids), [[4, 4, 4]] * 2)
    np.testing.assert_array_equal(ops.convert_to_numpy(result.lengths), [3, 3])
    assert result.alignments is None


@pytest.mark.tensorflow_only
def test_runs_inside_tf_function_with_dynamic_limit():
    table = logits_for([[4], [END], [4]])

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
    def decode(limit):
        return greedy_search(
            scripted_step(table),
            {"t": tf.constant(0), "attention": tf.zeros((1, 3))},
            1,
            START,
            END,
            max_length=limit,
        ).ids

    np.testing.assert_array_equal(ops.convert_to_numpy(decode(tf.constant(3))), [[4, END, PAD]])
    np.testing.assert_array_equal(ops.convert_to_numpy(decode(tf.constant(1))), [[4]])


def test_never_generates_pad_or_start():
    table = logits_for([[PAD, START], [END, END]])  # the model prefers PAD and START
    table[0, 0, 5] = np.log(0.2)  # second choices
    table[0, 1, 4] = np.log(0.2)
    result = greedy_search(
        scripted_step(table),
        {"t": ops.convert_to_tensor(0), "attention": ops.zeros((2, 3))},
        2,
        START,
        END,
        max_length=2,
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(result.ids)[:, 0], [5, 4])
    log_probs = table - np.log(np.exp(table).sum(-1, keepdims=True))  # the model's own
    expected = [
        log_probs[0, 0, 5] + log_probs[1, 0, END],
        log_probs[0, 1, 4] + log_probs[1, 1, END],
    ]
    np.testing.assert_allclose(ops.convert_to_numpy(result.scores), expected, rtol=1e-5)
