import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import Attention, LocalAttention, LuongDecoder
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.layers.recurrent import numpy_stack

RNG = np.random.default_rng(5)
Y = RNG.normal(size=(2, 4, 3)).astype("float32")
MEMORY = RNG.normal(size=(2, 6, 10)).astype("float32")
MASK = np.array([[True] * 6, [True] * 3 + [False] * 3])
H0 = RNG.normal(size=(2, 10)).astype("float32")
C0 = RNG.normal(size=(2, 10)).astype("float32")


def numpy_score(decoder, h, memory):
    """score(h_t, h_s) `(batch, T_x)` with the decoder's score weights (Luong eq. 8)."""
    score, q = decoder.attention_layer.score_fn, h[:, None, :]
    if decoder.score == "dot":
        return ref.dot_score(q, memory)[:, 0]
    if decoder.score == "general":
        return ref.general_score(q, memory, ops.convert_to_numpy(score.kernel))[:, 0]
    assert decoder.score == "concat"
    return ref.concat_score(
        q,
        memory,
        ops.convert_to_numpy(score.kernel),
        ops.convert_to_numpy(score.v),
        ops.convert_to_numpy(score.bias),
    )[:, 0]


def numpy_luong(decoder, y, memory, mask, h, c):
    """Luong et al. eqs. 5, 7, 9, 10 with an LSTM and input feeding, step by step."""
    cell, layer = decoder.rnn.cell, decoder.attention_layer
    w_c = ops.convert_to_numpy(decoder.attentional_state.kernel)
    source = np.arange(memory.shape[1])
    feed = np.zeros((y.shape[0], decoder.units))
    outputs, alignments = [], []
    for t in range(y.shape[1]):
        x = np.concatenate([y[:, t], feed], axis=-1) if decoder.input_feeding else y[:, t]
        h, c = ref.lstm_step(
            x,
            h,
            c,
            ops.convert_to_numpy(cell.kernel),
            ops.convert_to_numpy(cell.recurrent_kernel),
            ops.convert_to_numpy(cell.bias),
        )
        scores = numpy_score(decoder, h, memory)
        if decoder.attention == "global":
            alpha = ref.softmax(scores, mask)  # eq. 7
        else:
            if decoder.attention == "local-m":
                p = np.full((y.shape[0], 1), float(t))
            else:  # eq. 9: p_t = S sigmoid(v_p^T tanh(W_p h_t)), S = real source length
                hidden = np.tanh(
                    h @ ops.convert_to_numpy(layer.position_kernel)
                ) @ ops.convert_to_numpy(layer.position_v)
                p = mask.sum(-1, keepdims=True) * ref.sigmoid(hidden)[:, None]
            window = np.abs(source[None, :] - p) <= decoder.window
            alpha = ref.softmax(scores, mask & window)
            if decoder.attention == "local-p":  # eq. 10, sigma = D / 2
                sigma = decoder.window / 2
                alpha = alpha * np.exp(-((source[None, :] - p) ** 2) / (2 * sigma**2))
        context = np.einsum("bk,bkd->bd", alpha, memory)
        feed = np.tanh(np.concatenate([context, h], axis=-1) @ w_c)  # eq. 5
        outputs.append(feed)
        alignments.append(alpha)
    return np.stack(outputs, 1), np.stack(alignments, 1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"score": "general"},
        {"score": "dot"},
        {"score": "concat", "attention_units": 7},
        {"score": "general", "attention": "local-p", "window": 2},
        {"score": "general", "attention": "local-m", "window": 1},
        {"score": "general", "input_feeding": False},
        {"score": "dot", "attention": "local-p", "window": 2, "input_feeding": False},
    ],
    ids=lambda kwargs: "-".join(str(v) for v in kwargs.values()),
)
def test_matches_numpy_equations(kwargs):
    decoder = LuongDecoder(10, **kwargs)
    outputs, alignments = decoder(
        Y, MEMORY, memory_mask=MASK, initial_state=[H0, C0], return_attention_scores=True
    )
    expected_outputs, expected_alignments = numpy_luong(decoder, Y, MEMORY, MASK, H0, C0)
    np.testing.assert_allclose(
        ops.convert_to_numpy(alignments), expected_alignments, rtol=1e-4, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs), expected_outputs, rtol=1e-4, atol=1e-5
    )
    assert np.all(ops.convert_to_numpy(alignments)[1, :, 3:] == 0.0)


@pytest.mark.parametrize(
    "cell,attention,input_feeding",
    [
        ("lstm", "global", True),
        ("gru", "local-m", True),
        ("lstm", "local-p", True),
        ("gru", "global", False),
        ("lstm", "local-m", False),
        ("gru", "local-p", False),
    ],
)
def test_step_by_step_equals_teacher_forced(cell, attention, input_feeding):
    decoder = LuongDecoder(8, cell=cell, attention=attention, window=2, input_feeding=input_feeding)
    outputs, alignments = decoder(Y, MEMORY, memory_mask=MASK, return_attention_scores=True)
    states = decoder.get_initial_state(2)
    prepared = decoder.prepare_memory(MEMORY)
    for t in range(Y.shape[1]):
        output_t, alignment_t, states = decoder.step(Y[:, t], states, MEMORY, prepared, MASK)
        np.testing.assert_allclose(
            ops.convert_to_numpy(output_t),
            ops.convert_to_numpy(outputs)[:, t],
            rtol=1e-5,
            atol=1e-5,
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(alignment_t), ops.convert_to_numpy(alignments)[:, t], atol=1e-5
        )


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_fast_path_equals_the_step_loop(cell):
    """Without input feeding `call` runs keras.layers.LSTM/GRU; `run_steps` is the step loop."""
    decoder = LuongDecoder(8, cell=cell, attention="local-m", window=1, input_feeding=False)
    initial = [RNG.normal(size=(2, 8)).astype("float32")] * decoder.num_cell_states
    outputs, alignments = decoder(
        Y, MEMORY, memory_mask=MASK, initial_state=initial, return_attention_scores=True
    )
    loop_outputs, loop_alignments = decoder.run_steps(Y, MEMORY, MASK, initial)
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs), ops.convert_to_numpy(loop_outputs), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(alignments), ops.convert_to_numpy(loop_alignments), atol=1e-6
    )
    assert isinstance(decoder.rnn, keras.layers.LSTM if cell == "lstm" else keras.layers.GRU)


def test_input_feeding_changes_the_recurrence():
    fed = LuongDecoder(8, input_feeding=True)
    fed(Y, MEMORY)
    plain = LuongDecoder(8, input_feeding=False)
    plain(Y, MEMORY)
    assert fed.rnn.cell.kernel.shape == (3 + 8, 32) and plain.rnn.cell.kernel.shape == (3, 32)
    assert len(fed.get_initial_state(2)) == 3 and len(plain.get_initial_state(2)) == 2
    local_m = LuongDecoder(8, cell="gru", attention="local-m")
    assert [tuple(s.shape) for s in local_m.get_initial_state(2)] == [(2, 8), (2, 8), (2,)]


def test_local_m_window_follows_the_target_step():
    decoder = LuongDecoder(8, attention="local-m", window=1)
    _, alignments = decoder(Y, MEMORY, return_attention_scores=True)
    nonzero = ops.convert_to_numpy(alignments)[0] > 0
    for t in range(4):
        assert np.flatnonzero(nonzero[t]).tolist() == [s for s in (t - 1, t, t + 1) if 0 <= s < 6]


def test_bad_arguments():
    with pytest.raises(ValueError, match="cell='rnn'"):
        LuongDecoder(8, cell="rnn")
    with pytest.raises(ValueError, match="units=0"):
        LuongDecoder(0)
    with pytest.raises(ValueError, match="attention='local'"):
        LuongDecoder(8, attention="local")
    with pytest.raises(ValueError, match="input_feeding='yes'"):
        LuongDecoder(8, input_feeding="yes")
    with pytest.raises(ValueError, match="window=-1"):
        LuongDecoder(8, attention="local-m", window=-1)
    for attention in ("global", "local-p"):  # checked even where it is ignored
        with pytest.raises(ValueError, match="position_gradient_scale=0"):
            LuongDecoder(8, attention=attention, position_gradient_scale=0)
    with pytest.raises(ValueError, match="score"):
        LuongDecoder(8, score="nope")
    with pytest.raises(ValueError, match="same size"):
        LuongDecoder(8, score="dot")(Y, MEMORY)
    with pytest.raises(ValueError, match="1 initial state"):
        LuongDecoder(8, cell="gru")(Y, MEMORY, initial_state=[np.zeros((2, 8))] * 2)


@pytest.mark.parametrize("input_feeding", [True, False])
def test_padded_targets_give_zero_outputs_and_keras_mask(input_feeding):
    tokens = keras.Input((None,), dtype="int32")
    memory = keras.Input((None, 10))
    embedded = keras.layers.Embedding(20, 3, mask_zero=True)(tokens)
    outputs = LuongDecoder(8, input_feeding=input_feeding)(embedded, memory)
    pooled = keras.layers.GlobalAveragePooling1D()(outputs)
    model = keras.Model([tokens, memory], [outputs, pooled])
    out, mean = model([np.array([[4, 5, 0], [6, 0, 0]]), MEMORY])
    out = ops.convert_to_numpy(out)
    assert np.all(out[0, 2] == 0.0) and np.all(out[1, 1:] == 0.0)
    assert np.any(out[0, 1] != 0.0)
    np.testing.assert_allclose(ops.convert_to_numpy(mean)[0], out[0, :2].mean(0), rtol=1e-5)


@pytest.mark.every_backend
def test_harness_input_feeding_global():
    run_layer_test(
        LuongDecoder,
        {"units": 8, "cell": "lstm", "score": "concat", "attention_units": 5},
        {"inputs": Y, "memory": MEMORY},
        mask=MASK,
        padded_input="memory",
        mask_kwarg="memory_mask",
        expected_output_shape=(2, 4, 8),
        atol=1e-5,
        rtol=1e-5,
    )


def test_harness_fast_path_local_p_through_keras_masking():
    run_layer_test(
        LuongDecoder,
        {
            "units": 8,
            "cell": "gru",
            "attention": "local-p",
            "window": 2,
            "input_feeding": False,
            "position_gradient_scale": 0.25,
        },
        {"inputs": Y, "memory": MEMORY},
        mask=MASK,
        padded_input="memory",
        expected_output_shape=(2, 4, 8),
        atol=1e-5,
        rtol=1e-5,
    )


def test_every_score_and_distribution_of_the_catalog_decodes():
    """The train CLI offers every name; each must run in the loop and zero the padding."""
    from keras_attn.distributions import DISTRIBUTIONS
    from keras_attn.scores import SCORES

    memory = MEMORY[:, :, :8]  # "dot" and "cosine" compare h_t with h_s: units == d_m
    pairs = [(score, "softmax") for score in sorted(SCORES)]
    pairs += [("general", distribution) for distribution in sorted(DISTRIBUTIONS)]
    for score, distribution in pairs:
        decoder = LuongDecoder(8, score=score, distribution=distribution)
        outputs, alignments = decoder(Y, memory, memory_mask=MASK, return_attention_scores=True)
        states = decoder.get_initial_state(2)
        output_0, _, _ = decoder.step(Y[:, 0], states, memory, decoder.prepare_memory(memory), MASK)
        np.testing.assert_allclose(
            ops.convert_to_numpy(output_0), ops.convert_to_numpy(outputs)[:, 0], atol=1e-5
        )
        assert np.all(ops.convert_to_numpy(alignments)[1, :, 3:] == 0.0), (score, distribution)


@pytest.mark.parametrize(
    "attention,layer",
    [
        ("global", lambda: Attention(score="general")),
        ("local-m", lambda: LocalAttention(mode="monotonic", window=2, score="general")),
        ("local-p", lambda: LocalAttention(mode="predictive", window=2, score="general")),
    ],
)
def test_an_attention_layer_equals_its_name(attention, layer):
    """`attention=<layer>` computes what the name builds, and survives a config round trip."""
    named = LuongDecoder(8, score="general", attention=attention, window=2)
    expected = named(Y, MEMORY, memory_mask=MASK, return_attention_scores=True)
    decoder = LuongDecoder(8, attention=layer())
    decoder(Y, MEMORY, memory_mask=MASK)
    decoder.set_weights(named.get_weights())
    got = decoder(Y, MEMORY, memory_mask=MASK, return_attention_scores=True)
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_allclose(
            ops.convert_to_numpy(a), ops.convert_to_numpy(b), rtol=1e-6, atol=1e-7
        )
    states = decoder.get_initial_state(2)
    prepared = decoder.prepare_memory(MEMORY)
    output_0, _, states = decoder.step(Y[:, 0], states, MEMORY, prepared, MASK)
    np.testing.assert_allclose(
        ops.convert_to_numpy(output_0), ops.convert_to_numpy(got[0])[:, 0], atol=1e-6
    )
    assert len(states) == 3 + (attention == "local-m")  # [h, c], h~ and the step index

    clone = LuongDecoder.from_config(decoder.get_config())
    assert type(clone.attention_layer) is type(decoder.attention_layer)
    clone(Y, MEMORY, memory_mask=MASK)
    clone.set_weights(decoder.get_weights())
    np.testing.assert_allclose(
        ops.convert_to_numpy(clone(Y, MEMORY, memory_mask=MASK)), ops.convert_to_numpy(got[0])
    )


def test_an_attention_layer_of_another_kind_is_refused():
    with pytest.raises(ValueError, match="attention=<Dense"):
        LuongDecoder(8, attention=keras.layers.Dense(3))


def numpy_stacked_luong(decoder, y, memory, mask, states):
    """Luong et al.'s stacked decoder, global `general` attention, LSTM layers, step by step.

    Input feeding enters the bottom layer; the attention and eq. 5 read the top layer's h_t.
    """
    cells = numpy_stack.decoder_cells(decoder, decoder.rnn.cell)
    w_a = ops.convert_to_numpy(decoder.attention_layer.score_fn.kernel)
    w_c = ops.convert_to_numpy(decoder.attentional_state.kernel)
    feed = np.zeros((y.shape[0], decoder.units))
    outputs, alignments = [], []
    for t in range(y.shape[1]):
        x = np.concatenate([y[:, t], feed], axis=-1) if decoder.input_feeding else y[:, t]
        h, states = numpy_stack.lstm_stack_step(x, states, cells)
        alpha = ref.softmax(ref.general_score(h[:, None, :], memory, w_a)[:, 0], mask)  # eq. 7
        context = np.einsum("bk,bkd->bd", alpha, memory)
        feed = np.tanh(np.concatenate([context, h], axis=-1) @ w_c)  # eq. 5
        outputs.append(feed)
        alignments.append(alpha)
    return np.stack(outputs, 1), np.stack(alignments, 1)


@pytest.mark.parametrize("num_layers,input_feeding", [(2, True), (4, True), (3, False)])
def test_stacked_decoder_matches_numpy_equations(num_layers, input_feeding):
    """Layers 3 and 4 add their input to their output; dropout between layers is off."""
    decoder = LuongDecoder(
        10, num_layers=num_layers, layer_dropout=0.5, input_feeding=input_feeding
    )
    initial = [RNG.normal(size=(2, 10)).astype("float32") for _ in range(2 * num_layers)]
    outputs, alignments = decoder(
        Y, MEMORY, memory_mask=MASK, initial_state=initial, return_attention_scores=True
    )
    expected_outputs, expected_alignments = numpy_stacked_luong(decoder, Y, MEMORY, MASK, initial)
    np.testing.assert_allclose(
        ops.convert_to_numpy(alignments), expected_alignments, rtol=1e-4, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs), expected_outputs, rtol=1e-4, atol=1e-5
    )
    # A stack without the residual connections computes something else from layer 3 up.
    if num_layers >= 3:
        cells = numpy_stack.decoder_cells(decoder, decoder.rnn.cell)
        x = np.concatenate([Y[:, 0], np.zeros((2, 10))], -1) if input_feeding else Y[:, 0]
        h_residual, _ = numpy_stack.lstm_stack_step(x, initial, cells)
        h = x
        for index, weights in enumerate(cells):
            h, _ = ref.lstm_step(h, initial[2 * index], initial[2 * index + 1], *weights)
        assert np.abs(h_residual - h).max() > 1e-2


@pytest.mark.parametrize(
    "num_layers,cell,attention,input_feeding",
    [(2, "lstm", "global", True), (4, "gru", "local-m", True), (4, "lstm", "local-p", False)],
)
def test_stacked_step_by_step_equals_teacher_forced(num_layers, cell, attention, input_feeding):
    decoder = LuongDecoder(
        8,
        cell=cell,
        attention=attention,
        window=2,
        input_feeding=input_feeding,
        num_layers=num_layers,
        layer_dropout=0.3,
    )
    outputs, alignments = decoder(Y, MEMORY, memory_mask=MASK, return_attention_scores=True)
    states = decoder.get_initial_state(2)
    assert len(states) == decoder.num_initial_states + input_feeding + (attention == "local-m")
    prepared = decoder.prepare_memory(MEMORY)
    for t in range(Y.shape[1]):
        output, alignment, states = decoder.step(Y[:, t], states, MEMORY, prepared, MASK)
        np.testing.assert_allclose(
            ops.convert_to_numpy(output), ops.convert_to_numpy(outputs)[:, t], rtol=1e-5, atol=1e-5
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(alignment), ops.convert_to_numpy(alignments)[:, t], atol=1e-6
        )


def test_dropout_between_layers_acts_in_training_only():
    decoder = LuongDecoder(8, num_layers=2, layer_dropout=0.5)
    inference = ops.convert_to_numpy(decoder(Y, MEMORY, memory_mask=MASK))
    np.testing.assert_array_equal(
        ops.convert_to_numpy(decoder(Y, MEMORY, memory_mask=MASK)), inference
    )
    keras.utils.set_random_seed(0)
    training = ops.convert_to_numpy(decoder(Y, MEMORY, memory_mask=MASK, training=True))
    assert np.abs(training - inference).max() > 1e-3


def test_depth_arguments_and_config():
    assert "num_layers" not in LuongDecoder(8).get_config()  # one layer: the config of old
    assert "layer_dropout" not in LuongDecoder(8).get_config()
    config = LuongDecoder(8, num_layers=3, layer_dropout=0.25).get_config()
    assert (config["num_layers"], config["layer_dropout"]) == (3, 0.25)
    restored = LuongDecoder.from_config(config)
    assert (restored.num_layers, restored.layer_dropout) == (3, 0.25)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="num_layers"):
            LuongDecoder(8, num_layers=bad)
    for bad in (1.0, -0.1, "0.1", float("nan")):
        with pytest.raises(ValueError, match="layer_dropout"):
            LuongDecoder(8, num_layers=2, layer_dropout=bad)
    with pytest.raises(ValueError, match="of 2 layers takes 4 initial state"):
        LuongDecoder(8, num_layers=2)(Y, MEMORY, initial_state=[H0[:, :8], C0[:, :8]])


def test_harness_stacked():
    run_layer_test(
        LuongDecoder,
        {"units": 8, "num_layers": 3, "layer_dropout": 0.1, "cell": "gru"},
        {"inputs": Y, "memory": MEMORY},
        mask=MASK,
        padded_input="memory",
        mask_kwarg="memory_mask",
        expected_output_shape=(2, 4, 8),
        atol=1e-5,
        rtol=1e-5,
    )
