import keras
import numpy as np
import pytest

from keras_attn.layers import BahdanauDecoder
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(3)
Y = RNG.normal(size=(2, 4, 3)).astype("float32")
MEMORY = RNG.normal(size=(2, 6, 10)).astype("float32")
MASK = np.array([[True] * 6, [True] * 3 + [False] * 3])


def numpy_bahdanau(decoder, y, memory, mask, h, c):
    """Bahdanau et al.'s decoder with an LSTM f, step by step."""
    score, cell = decoder.score_fn, decoder.rnn_cell
    outputs, alignments = [], []
    for t in range(y.shape[1]):
        scores = ref.additive_score(
            h[:, None, :],
            memory,
            score.query_kernel.numpy(),
            score.key_kernel.numpy(),
            score.v.numpy(),
            score.bias.numpy(),
        )[:, 0]
        alpha = ref.softmax(scores, mask)  # alpha_t
        context = np.einsum("bk,bkd->bd", alpha, memory)  # c^(t)
        x = np.concatenate([y[:, t], context], axis=-1)
        h, c = ref.lstm_step(
            x, h, c, cell.kernel.numpy(), cell.recurrent_kernel.numpy(), cell.bias.numpy()
        )
        outputs.append(np.concatenate([h, context, y[:, t]], axis=-1))
        alignments.append(alpha)
    return np.stack(outputs, 1), np.stack(alignments, 1)


def test_matches_numpy_equations():
    decoder = BahdanauDecoder(8)
    h0 = RNG.normal(size=(2, 8)).astype("float32")
    c0 = RNG.normal(size=(2, 8)).astype("float32")
    outputs, alignments = decoder(
        Y, MEMORY, memory_mask=MASK, initial_state=[h0, c0], return_attention_scores=True
    )
    expected_outputs, expected_alignments = numpy_bahdanau(decoder, Y, MEMORY, MASK, h0, c0)
    np.testing.assert_allclose(alignments.numpy(), expected_alignments, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(outputs.numpy(), expected_outputs, rtol=1e-4, atol=1e-5)
    assert np.all(alignments.numpy()[1, :, 3:] == 0.0)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_step_by_step_equals_teacher_forced(cell):
    decoder = BahdanauDecoder(8, cell=cell)
    outputs, alignments = decoder(Y, MEMORY, memory_mask=MASK, return_attention_scores=True)
    states = decoder.get_initial_state(2)
    prepared = decoder.prepare_memory(MEMORY)
    for t in range(Y.shape[1]):
        output_t, alignment_t, states = decoder.step(Y[:, t], states, MEMORY, prepared, MASK)
        np.testing.assert_allclose(output_t.numpy(), outputs.numpy()[:, t], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(alignment_t.numpy(), alignments.numpy()[:, t], atol=1e-7)


def test_general_and_dot_scores():
    dot = BahdanauDecoder(10, score="dot")
    assert dot(Y, MEMORY).shape == (2, 4, 23)
    with pytest.raises(ValueError, match="same size"):
        BahdanauDecoder(8, score="dot")(Y, MEMORY)
    assert BahdanauDecoder(8, score="general")(Y, MEMORY).shape == (2, 4, 21)


def test_bad_arguments():
    with pytest.raises(ValueError, match="cell='rnn'"):
        BahdanauDecoder(8, cell="rnn")
    with pytest.raises(ValueError, match="units=0"):
        BahdanauDecoder(0)
    with pytest.raises(ValueError, match="1 initial state"):
        BahdanauDecoder(8, cell="gru")(Y, MEMORY, initial_state=[np.zeros((2, 8))] * 2)


def test_padded_targets_give_zero_outputs_and_keras_mask():
    tokens = keras.Input((None,), dtype="int32")
    memory = keras.Input((None, 10))
    embedded = keras.layers.Embedding(20, 3, mask_zero=True)(tokens)
    outputs = BahdanauDecoder(8)(embedded, memory)
    model = keras.Model([tokens, memory], outputs)
    out = model([np.array([[4, 5, 0], [6, 0, 0]]), MEMORY]).numpy()
    assert np.all(out[0, 2] == 0.0) and np.all(out[1, 1:] == 0.0)
    assert np.any(out[0, 1] != 0.0)


def test_target_mask_flows_to_the_next_layer_with_and_without_alignments():
    tokens = keras.Input((None,), dtype="int32")
    memory = keras.Input((None, 10))
    embedded = keras.layers.Embedding(20, 3, mask_zero=True)(tokens)
    outputs, _ = BahdanauDecoder(8)(embedded, memory, return_attention_scores=True)
    pooled = keras.layers.GlobalAveragePooling1D()(outputs)
    model = keras.Model([tokens, memory], [outputs, pooled])
    out, mean = model([np.array([[4, 5, 0]]), MEMORY[:1]])
    np.testing.assert_allclose(mean.numpy()[0], out.numpy()[0, :2].mean(0), rtol=1e-5)


def test_harness():
    run_layer_test(
        BahdanauDecoder,
        {"units": 8, "cell": "lstm", "score": "additive", "attention_units": 5},
        {"inputs": Y, "memory": MEMORY},
        mask=MASK,
        padded_input="memory",
        mask_kwarg="memory_mask",
        expected_output_shape=(2, 4, 21),
        atol=1e-5,
        rtol=1e-5,
    )
