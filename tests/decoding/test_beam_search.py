import numpy as np
import pytest
from keras import ops

from keras_attn.decoding import beam_search, greedy_search
from keras_attn.models import (
    LuongTranslatorSteps,
    RNNTranslatorSteps,
    rnn_attention_translator,
    rnn_luong_translator,
)
from tests.decoding.scripted_models import (
    END,
    PAD,
    START,
    V,
    expected_alignment,
    path_log_prob,
    prefix_state,
    prefix_step,
    random_table,
    reference_beam_search,
)
from tests.lazy_tf import tf

pytestmark = pytest.mark.every_backend


def tree_table(probabilities, max_length=3):
    """Logits of a prefix model from {prefix tuple: {token: p}}; other prefixes: END surely."""
    table = np.full((2 * V**max_length, V), -30.0, np.float32)
    table[:, END] = 0.0
    for prefix, distribution in probabilities.items():
        row = table[sum(t * V ** (len(prefix) - i) for i, t in enumerate((START, *prefix)))]
        row[:] = -30.0
        for token, p in distribution.items():
            row[token] = np.log(p)
    return table


def decode(table, batch, max_length, **kwargs):
    return beam_search(
        prefix_step(table, max_length),
        prefix_state(batch, max_length),
        batch,
        START,
        END,
        max_length,
        **kwargs,
    )


def test_beam_of_one_is_greedy_on_a_prefix_model():
    table = random_table(3, 5, seed=0)
    greedy = greedy_search(prefix_step(table, 5), prefix_state(3, 5), 3, START, END, 5)
    for alpha in (0.0, 0.8):
        beam = decode(table, 3, 5, beam_size=1, length_penalty=alpha)
        np.testing.assert_array_equal(
            ops.convert_to_numpy(beam.ids), ops.convert_to_numpy(greedy.ids)
        )
        np.testing.assert_array_equal(
            ops.convert_to_numpy(beam.lengths), ops.convert_to_numpy(greedy.lengths)
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(beam.scores), ops.convert_to_numpy(greedy.scores), rtol=1e-6
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(beam.alignments), ops.convert_to_numpy(greedy.alignments)
        )


@pytest.mark.parametrize("beam_size", [2, 3])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("seed", [1, 2])
def test_all_beams_match_a_numpy_beam_search(beam_size, alpha, seed):
    batch, max_length = 2, 4
    table = random_table(batch, max_length, seed=seed)
    result = decode(
        table, batch, max_length, beam_size=beam_size, length_penalty=alpha, return_all_beams=True
    )
    assert result.ids.shape == (batch, beam_size, max_length)
    assert result.alignments.shape == (batch, beam_size, max_length, V)
    for sentence in range(batch):
        reference = reference_beam_search(table, sentence, beam_size, alpha, max_length)
        for k, (ids, log_prob, steps, finished) in enumerate(reference):
            np.testing.assert_array_equal(ops.convert_to_numpy(result.ids[sentence, k]), ids)
            assert result.lengths[sentence, k] == steps - int(finished)
            np.testing.assert_allclose(
                ops.convert_to_numpy(result.scores[sentence, k]), log_prob, rtol=1e-5
            )
            # The state went along each path: scores and alignments recomputed from the ids.
            np.testing.assert_allclose(
                log_prob, path_log_prob(table, sentence, list(ids[:steps])), rtol=1e-6
            )
            np.testing.assert_allclose(
                ops.convert_to_numpy(result.alignments[sentence, k]),
                expected_alignment(ids, steps, max_length),
                atol=1e-6,
            )


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_best_hypothesis_with_early_stop_equals_the_full_search(alpha):
    batch, max_length = 2, 4
    for seed in range(3, 7):
        table = random_table(batch, max_length, seed=seed)
        result = decode(table, batch, max_length, beam_size=3, length_penalty=alpha)
        assert result.ids.shape == (batch, max_length)
        for sentence in range(batch):
            ids, log_prob, steps, finished = reference_beam_search(
                table, sentence, 3, alpha, max_length
            )[0]
            np.testing.assert_array_equal(ops.convert_to_numpy(result.ids[sentence]), ids)
            np.testing.assert_allclose(
                ops.convert_to_numpy(result.scores[sentence]), log_prob, rtol=1e-5
            )
            assert result.lengths[sentence] == steps - int(finished)


def test_finds_the_hypothesis_greedy_misses():
    # A then anything: at most 0.5 * 0.4; B END: 0.4 * 0.9 = 0.36.
    table = tree_table(
        {(): {4: 0.5, 5: 0.4, END: 0.1}, (4,): {4: 0.4, 5: 0.3, END: 0.3}, (5,): {END: 0.9, 4: 0.1}}
    )
    greedy = greedy_search(prefix_step(table, 3), prefix_state(1, 3), 1, START, END, 3)
    assert ops.convert_to_numpy(greedy.ids)[0].tolist() == [4, 4, END]
    beam = decode(table, 1, 3, beam_size=2)
    np.testing.assert_array_equal(ops.convert_to_numpy(beam.ids), [[5, END, PAD]])
    np.testing.assert_allclose(ops.convert_to_numpy(beam.scores), [np.log(0.36)], rtol=1e-5)
    assert ops.convert_to_numpy(beam.lengths).tolist() == [1]
    assert ops.convert_to_numpy(beam.scores)[0] > ops.convert_to_numpy(greedy.scores)[0]


def test_length_penalty_changes_the_choice():
    # [END]: log 0.4 = -0.916, length 1; [4, END]: log(0.38 * 0.95) = -1.019, length 2.
    # alpha = 1: -0.916 / 1 < -1.019 / (7 / 6) = -0.873, so the longer one wins.
    table = tree_table({(): {END: 0.4, 4: 0.38, 5: 0.22}, (4,): {END: 0.95, 5: 0.05}})
    short = decode(table, 1, 3, beam_size=2, length_penalty=0.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(short.ids), [[END, PAD, PAD]])
    np.testing.assert_allclose(ops.convert_to_numpy(short.scores), [np.log(0.4)], rtol=1e-5)
    long = decode(table, 1, 3, beam_size=2, length_penalty=1.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(long.ids), [[4, END, PAD]])
    np.testing.assert_allclose(ops.convert_to_numpy(long.scores), [np.log(0.38 * 0.95)], rtol=1e-5)


# The tests that count the step's Python calls are TensorFlow's: its eager while_loop calls the
# body once per iteration, JAX's traces it once.
def counting(step):
    calls = []

    def counted(tokens, state):
        calls.append(1)
        return step(tokens, state)

    return counted, calls


@pytest.mark.tensorflow_only
def test_early_stop():
    # END first with 0.9: with alpha = 0 nothing live can catch up after one step.
    table = tree_table(
        {(): {END: 0.9, 4: 0.06, 5: 0.04}, (4,): {4: 0.99, END: 0.01}, (5,): {5: 0.99, END: 0.01}},
        max_length=8,
    )
    step, calls = counting(prefix_step(table, 8))
    best = beam_search(step, prefix_state(1, 8), 1, START, END, 8, beam_size=2)
    assert len(calls) == 1 and ops.convert_to_numpy(best.ids)[0, 0] == END
    # All beams: on until the second hypothesis, 4 4 (then END surely), has finished.
    step, calls = counting(prefix_step(table, 8))
    every = beam_search(
        step, prefix_state(1, 8), 1, START, END, 8, beam_size=2, return_all_beams=True
    )
    assert len(calls) == 3
    np.testing.assert_array_equal(
        ops.convert_to_numpy(every.ids)[0, :, :4], [[END, 0, 0, 0], [4, 4, END, 0]]
    )
    assert ops.convert_to_numpy(every.lengths).tolist() == [[0, 2]]
    # With alpha = 2 the live [4] (log 0.06 = -2.81) could still reach -2.81 / lp(8) = -0.60,
    # below the finished [END] (-0.105): stop too. With END at 0.5 and [4] at 0.45 its bound
    # -0.80 / lp(8) = -0.17 beats -0.69: the search goes on (and [4 4 END] wins at step 3).
    step, calls = counting(prefix_step(table, 8))
    beam_search(step, prefix_state(1, 8), 1, START, END, 8, beam_size=2, length_penalty=2.0)
    assert len(calls) == 1
    table[START, [END, 4, 5]] = np.log([0.5, 0.45, 0.05])
    step, calls = counting(prefix_step(table, 8))
    best = beam_search(step, prefix_state(1, 8), 1, START, END, 8, beam_size=2, length_penalty=2.0)
    assert len(calls) == 3 and ops.convert_to_numpy(best.ids)[0, :3].tolist() == [4, 4, END]


@pytest.mark.tensorflow_only
def test_stops_when_all_beams_finished():
    table = tree_table({(): {4: 0.5, 5: 0.5}, (4,): {END: 1.0}, (5,): {END: 1.0}}, max_length=6)
    step, calls = counting(prefix_step(table, 6))
    result = beam_search(
        step, prefix_state(1, 6), 1, START, END, 6, beam_size=2, return_all_beams=True
    )
    assert len(calls) == 2
    assert sorted(ops.convert_to_numpy(result.ids)[0, :, 0].tolist()) == [4, 5]
    np.testing.assert_array_equal(
        ops.convert_to_numpy(result.ids)[0, :, 1:], [[END, 0, 0, 0, 0]] * 2
    )


def test_never_generates_pad_or_start():
    table = tree_table({(): {PAD: 0.5, START: 0.3, 4: 0.2}, (4,): {START: 0.9, END: 0.1}})
    result = decode(table, 1, 3, beam_size=3, return_all_beams=True)
    ids, lengths = ops.convert_to_numpy(result.ids)[0], ops.convert_to_numpy(result.lengths)[0]
    for k in range(3):
        assert not {PAD, START} & set(ids[k, : lengths[k] + 1].tolist())


@pytest.mark.tensorflow_only
def test_runs_in_a_tf_function_with_dynamic_sizes():
    max_length = 4
    table = random_table(3, max_length, seed=9)

    @tf.function(
        input_signature=[
            tf.TensorSpec([], tf.int32),
            tf.TensorSpec([], tf.int32),
            tf.TensorSpec([], tf.float32),
        ]
    )
    def run(batch, limit, alpha):
        state = prefix_state(3, max_length)
        state["prefix"]["code"] = tf.range(batch)
        state["history"] = (tf.zeros((batch, max_length + 1), tf.int32),)
        state["attention"] = tf.zeros((batch, V))
        step = prefix_step(table, max_length)
        return beam_search(step, state, batch, START, END, limit, beam_size=2, length_penalty=alpha)

    for alpha in (0.0, 1.0):
        got = run(tf.constant(2), tf.constant(max_length), tf.constant(alpha))
        eager = decode(table, 2, max_length, beam_size=2, length_penalty=alpha)
        np.testing.assert_array_equal(
            ops.convert_to_numpy(got.ids), ops.convert_to_numpy(eager.ids)
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(got.scores), ops.convert_to_numpy(eager.scores), rtol=1e-6
        )


@pytest.mark.tensorflow_only
def test_xla_compiles_top_k_to_its_kernel_not_a_sort_of_every_score():
    """Under jit_compile the per-step top-k must stay a TopK, not a sort of batch x (k * V).

    XLA on CPU lowers top_k to its TopK kernel only when the top-k values and indices are sliced
    alike; reading just the best value for the early stop once made it sort all beam_size * V
    scores every step (37x slower for V = 2000, beam 4)."""
    max_length = 4
    table = random_table(3, max_length, seed=10)

    @tf.function(jit_compile=True)
    def run(code):
        state = prefix_state(3, max_length)
        state["prefix"]["code"] = code
        return beam_search(prefix_step(table, max_length), state, 3, START, END, max_length, 3)

    code = tf.range(3)
    got = run(code)
    eager = decode(table, 3, max_length, beam_size=3)
    np.testing.assert_array_equal(ops.convert_to_numpy(got.ids), ops.convert_to_numpy(eager.ids))
    np.testing.assert_allclose(
        ops.convert_to_numpy(got.scores), ops.convert_to_numpy(eager.scores), rtol=1e-6
    )
    hlo = run.experimental_get_compiler_ir(code)(stage="optimized_hlo")
    assert 'custom_call_target="TopK"' in hlo
    assert " sort(" not in hlo


def test_rejects_a_bad_beam_size():
    with pytest.raises(ValueError, match="beam_size=0"):
        decode(random_table(1, 2, seed=0), 1, 2, beam_size=0)


TRANSLATORS = {
    "bahdanau": lambda: rnn_attention_translator(40, 30, embedding_dim=8, units=12, dropout=0.0),
    "luong-local-m": lambda: rnn_luong_translator(
        40, 30, embedding_dim=8, units=12, attention="local-m", window=2, dropout=0.0
    ),
}
STEPS = {"bahdanau": RNNTranslatorSteps, "luong-local-m": LuongTranslatorSteps}


@pytest.mark.parametrize("family", sorted(TRANSLATORS))
def test_beam_of_one_is_greedy_on_an_rnn_translator(family):
    model = TRANSLATORS[family]()
    steps = STEPS[family](model)
    source = np.random.default_rng(0).integers(4, 40, size=(3, 7)).astype("int32")
    source[1, 4:] = 0
    state = steps.encode(source)
    greedy = greedy_search(steps.step, state, 3, START, END, 9)
    beam = beam_search(steps.step, state, 3, START, END, 9, beam_size=1, length_penalty=0.6)
    np.testing.assert_array_equal(ops.convert_to_numpy(beam.ids), ops.convert_to_numpy(greedy.ids))
    np.testing.assert_array_equal(
        ops.convert_to_numpy(beam.lengths), ops.convert_to_numpy(greedy.lengths)
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(beam.scores), ops.convert_to_numpy(greedy.scores), rtol=1e-5
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(beam.alignments), ops.convert_to_numpy(greedy.alignments), atol=1e-6
    )
    # A wider beam on the same model: every hypothesis' score is its teacher-forced log-prob,
    # all nine hypotheses in one teacher-forced call (the decoder is causal: the filler after a
    # hypothesis' last token changes none of its log-probs).
    wide = beam_search(steps.step, state, 3, START, END, 9, beam_size=3, return_all_beams=True)
    ids, lengths = ops.convert_to_numpy(wide.ids), ops.convert_to_numpy(wide.lengths)
    generated = [
        list(ids[b, k, : lengths[b, k] + 1]) if lengths[b, k] < 9 else list(ids[b, k])
        for b in range(3)
        for k in range(3)
    ]
    targets = np.zeros((9, 9), "int32")
    for row, tokens in enumerate(generated):
        targets[row, : len(tokens)] = [START, *tokens[:-1]]
    logits = model({"source_ids": np.repeat(source, 3, axis=0), "target_ids": targets})
    log_probs = ops.convert_to_numpy(ops.log_softmax(logits))
    alignments = ops.convert_to_numpy(wide.alignments)
    for row, tokens in enumerate(generated):
        b, k = divmod(row, 3)
        expected = log_probs[row, np.arange(len(tokens)), tokens].sum()
        np.testing.assert_allclose(
            ops.convert_to_numpy(wide.scores[b, k]), expected, rtol=1e-4, atol=1e-4
        )
        assert np.all(alignments[b, k, : len(tokens)][:, source[b] == 0] == 0)
