"""`RNNLMSteps`: prefill then one cell update per layer and token equals the teacher-forced pass;
the decoding strategies run on it; `training` switches the model's dropout."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.decoding import greedy_search, sample
from keras_attn.models import RNNLMSteps, rnn_lm

START, END, VOCAB = 2, 3, 24
PROMPTS = np.array([[5, 6, 7, 8], [9, 10, 0, 0], [11, 0, 0, 0]], "int32")
CONTINUATION = np.array([[12, 13, 14], [15, 16, 17], [18, 19, 20]], "int32")


def tiny(**options):
    keras.utils.set_random_seed(0)
    return rnn_lm(VOCAB, **{"embedding_dim": 6, "units": 8, "dropout": 0.0, **options})


def stepped(steps, **call):
    """The logits of the first step (START fed) and of each continuation token, `(batch, 4, V)`."""
    state = steps.prefill(PROMPTS, **call)
    logits = []
    for token_ids in [np.full(3, START, "int32"), *CONTINUATION.T]:
        logits_t, state = steps.step(token_ids, state, **call)
        logits.append(ops.convert_to_numpy(logits_t))
    return np.stack(logits, axis=1), state


def teacher_forced(model, **call):
    """Each prompt's real tokens and its continuation in one pass, from the prompt's last token."""
    rows = []
    for prompt, following in zip(PROMPTS, CONTINUATION, strict=True):
        real = prompt[prompt != 0]
        sequence = np.concatenate([real, following])[None]
        rows.append(ops.convert_to_numpy(model(sequence, **call))[0, len(real) - 1 :])
    return np.stack(rows)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("num_layers", [1, 3])
def test_prefill_and_steps_equal_the_teacher_forced_pass(cell, num_layers):
    model = tiny(cell=cell, num_layers=num_layers, dropout=0.3)  # off: training=False
    logits, state = stepped(RNNLMSteps(model))
    assert logits.dtype == np.float32 and logits.shape == (3, 4, VOCAB)
    # the same float32 products, in the Keras RNN's loop and cell by cell
    np.testing.assert_allclose(logits, teacher_forced(model), rtol=1e-5, atol=1e-5)
    per_layer = 2 if cell == "lstm" else 1
    assert len(state["states"]) == per_layer * num_layers
    assert all(tuple(s.shape) == (3, 8) for s in state["states"])
    assert int(state["started"]) == 1


def test_the_first_step_returns_the_prompt_logits_and_keeps_the_states():
    steps = RNNLMSteps(tiny(num_layers=2))
    state = steps.prefill(PROMPTS)
    logits, after = steps.step(np.full(3, START, "int32"), state)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(logits), ops.convert_to_numpy(state["prompt_logits"])
    )
    for before, kept in zip(state["states"], after["states"], strict=True):
        np.testing.assert_array_equal(ops.convert_to_numpy(before), ops.convert_to_numpy(kept))
    assert (int(state["started"]), int(after["started"])) == (0, 1)


def test_greedy_search_continues_each_prompt_with_the_models_argmax():
    model = tiny(num_layers=2)
    steps = RNNLMSteps(model)
    result = greedy_search(steps.step, steps.prefill(PROMPTS), 3, START, END, max_length=5)
    ids, lengths = ops.convert_to_numpy(result.ids), ops.convert_to_numpy(result.lengths)
    for row, prompt in enumerate(PROMPTS):  # rerun the whole sequence for every token
        sequence = list(prompt[prompt != 0])
        for token in ids[row, : lengths[row] + 1]:  # END included where produced
            scores = ops.convert_to_numpy(model(np.array([sequence], "int32")))[0, -1]
            scores[[0, START]] = -np.inf  # PAD and START are never generated
            assert token == scores.argmax()
            sequence.append(token)


def test_sampling_runs_on_the_view():
    steps = RNNLMSteps(tiny())
    result = sample(
        steps.step,
        steps.prefill(PROMPTS),
        3,
        start_id=START,
        end_id=END,
        max_length=6,
        temperature=1.0,
        top_k=5,
        seed=1,
    )
    ids = ops.convert_to_numpy(result.ids)
    assert ids.shape == (3, 6) and not np.isin(ids, [START]).any()
    assert np.all(np.isfinite(ops.convert_to_numpy(result.scores)))


def test_training_true_applies_the_models_dropout():
    model = tiny(num_layers=2, dropout=0.5)
    on = [stepped(RNNLMSteps(model, training=True))[0] for _ in range(2)]
    assert np.abs(on[0] - on[1]).max() > 1e-3
    off = [stepped(RNNLMSteps(model, training=True), training=False)[0] for _ in range(2)]
    np.testing.assert_array_equal(off[0], off[1])
    np.testing.assert_allclose(off[0], teacher_forced(model), rtol=1e-5, atol=1e-5)


def test_training_true_without_dropout_is_the_training_pass():
    model = tiny(num_layers=3)
    logits, _ = stepped(RNNLMSteps(model, training=True))
    np.testing.assert_allclose(logits, teacher_forced(model, training=True), rtol=1e-5, atol=1e-5)
