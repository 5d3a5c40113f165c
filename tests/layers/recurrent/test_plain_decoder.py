import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import PlainDecoder
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.layers.recurrent import numpy_stack

RNG = np.random.default_rng(11)
Y = RNG.normal(size=(2, 4, 3)).astype("float32")
CONTEXT = RNG.normal(size=(2, 10)).astype("float32")
H0 = RNG.normal(size=(2, 8)).astype("float32")
C0 = RNG.normal(size=(2, 8)).astype("float32")
TARGET_MASK = np.array([[True] * 4, [True, True, False, False]])


def numpy_plain(decoder, y, context, h, c):
    """Cho et al. eq. 7 (context fed) or Sutskever et al. (not fed) with an LSTM, step by step."""
    cell = decoder.rnn.cell
    kernels = (
        ops.convert_to_numpy(cell.kernel),
        ops.convert_to_numpy(cell.recurrent_kernel),
        ops.convert_to_numpy(cell.bias),
    )
    outputs = []
    for t in range(y.shape[1]):
        x = np.concatenate([y[:, t], context], -1) if decoder.context_feeding else y[:, t]
        h, c = ref.lstm_step(x, h, c, *kernels)
        outputs.append(np.concatenate([h, context, y[:, t]], -1) if decoder.context_feeding else h)
    return np.stack(outputs, 1)


@pytest.mark.parametrize("context_feeding", [True, False])
def test_matches_numpy_equations(context_feeding):
    decoder = PlainDecoder(8, context_feeding=context_feeding)
    outputs = ops.convert_to_numpy(decoder(Y, CONTEXT, initial_state=[H0, C0]))
    expected = numpy_plain(decoder, Y, CONTEXT, H0, C0)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
    assert outputs.shape == (2, 4, 8 + 10 + 3 if context_feeding else 8)


def test_the_context_reaches_every_step_only_when_fed():
    other = CONTEXT + 1.0
    fed = PlainDecoder(8)
    changed = ops.convert_to_numpy(fed(Y, other, initial_state=[H0, C0]))[..., :8]
    same_start = ops.convert_to_numpy(fed(Y, CONTEXT, initial_state=[H0, C0]))[..., :8]
    assert np.all(np.abs(changed - same_start).max(-1) > 1e-4)  # every step sees c
    plain = PlainDecoder(8, context_feeding=False)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(plain(Y, other, initial_state=[H0, C0])),
        ops.convert_to_numpy(plain(Y, CONTEXT, initial_state=[H0, C0])),
    )
    assert fed.rnn.cell.kernel.shape == (3 + 10, 32) and plain.rnn.cell.kernel.shape == (3, 32)


@pytest.mark.parametrize(
    "cell,context_feeding", [("lstm", True), ("gru", True), ("lstm", False), ("gru", False)]
)
def test_step_by_step_equals_teacher_forced(cell, context_feeding):
    decoder = PlainDecoder(8, cell=cell, context_feeding=context_feeding)
    initial = [H0, C0][: decoder.num_states]
    outputs = ops.convert_to_numpy(decoder(Y, CONTEXT, initial_state=initial))
    states = initial
    for t in range(Y.shape[1]):
        output_t, states = decoder.step(Y[:, t], states, CONTEXT)
        np.testing.assert_allclose(
            ops.convert_to_numpy(output_t), outputs[:, t], rtol=1e-5, atol=1e-5
        )
    assert len(states) == decoder.num_states


def test_padded_targets_give_zero_outputs_and_keras_mask():
    tokens = keras.Input((None,), dtype="int32")
    context = keras.Input((10,))
    embedded = keras.layers.Embedding(20, 3, mask_zero=True)(tokens)
    outputs = PlainDecoder(8)(embedded, context)
    pooled = keras.layers.GlobalAveragePooling1D()(outputs)
    model = keras.Model([tokens, context], [outputs, pooled])
    out, mean = model([np.array([[4, 5, 0], [6, 0, 0]]), CONTEXT])
    out = ops.convert_to_numpy(out)
    assert np.all(out[0, 2] == 0.0) and np.all(out[1, 1:] == 0.0)
    assert np.all(out[0, 1] != 0.0)
    np.testing.assert_allclose(ops.convert_to_numpy(mean)[0], out[0, :2].mean(0), rtol=1e-5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="cell='rnn'"):
        PlainDecoder(8, cell="rnn")
    with pytest.raises(ValueError, match="units=0"):
        PlainDecoder(0)
    with pytest.raises(ValueError, match="context_feeding='yes'"):
        PlainDecoder(8, context_feeding="yes")
    with pytest.raises(ValueError, match="1 initial state"):
        PlainDecoder(8, cell="gru")(Y, CONTEXT, initial_state=[H0, H0])


@pytest.mark.every_backend
def test_harness():
    run_layer_test(
        PlainDecoder,
        {"units": 8, "cell": "lstm", "context_feeding": True},
        {"inputs": Y, "context": CONTEXT},
        call_kwargs={"initial_state": [H0, C0]},
        mask=TARGET_MASK,
        padded_input="inputs",
        mask_kwarg="inputs_mask",
        weights_kwarg=None,
        expected_output_shape=(2, 4, 21),
        atol=1e-5,
        rtol=1e-5,
    )


def numpy_stacked_plain(decoder, y, context, states):
    """Stacked LSTM decoder without attention: c into the bottom layer, the top layer's h out."""
    cells = numpy_stack.decoder_cells(decoder, decoder.rnn.cell)
    outputs = []
    for t in range(y.shape[1]):
        x = np.concatenate([y[:, t], context], -1) if decoder.context_feeding else y[:, t]
        h, states = numpy_stack.lstm_stack_step(x, states, cells)
        outputs.append(np.concatenate([h, context, y[:, t]], -1) if decoder.context_feeding else h)
    return np.stack(outputs, 1), states


@pytest.mark.parametrize("num_layers,context_feeding", [(2, True), (4, True), (3, False)])
def test_stacked_decoder_matches_numpy_equations(num_layers, context_feeding):
    """One Keras RNN pass per layer equals the stacked recurrence and its step-by-step use."""
    decoder = PlainDecoder(
        8, num_layers=num_layers, layer_dropout=0.5, context_feeding=context_feeding
    )
    initial = [RNG.normal(size=(2, 8)).astype("float32") for _ in range(2 * num_layers)]
    outputs = ops.convert_to_numpy(decoder(Y, CONTEXT, initial_state=initial))
    expected, expected_states = numpy_stacked_plain(decoder, Y, CONTEXT, initial)
    np.testing.assert_allclose(outputs, expected, rtol=1e-4, atol=1e-5)
    states = initial
    for t in range(Y.shape[1]):
        output_t, states = decoder.step(Y[:, t], states, CONTEXT)
        np.testing.assert_allclose(
            ops.convert_to_numpy(output_t), outputs[:, t], rtol=1e-5, atol=1e-5
        )
    assert len(states) == decoder.num_states == 2 * num_layers
    for ours, theirs in zip(states, expected_states, strict=True):
        np.testing.assert_allclose(ops.convert_to_numpy(ours), theirs, rtol=1e-4, atol=1e-5)


def test_stacked_gru_step_by_step_equals_teacher_forced():
    decoder = PlainDecoder(8, cell="gru", num_layers=4, reset_after=False)
    initial = [RNG.normal(size=(2, 8)).astype("float32") for _ in range(4)]
    outputs = ops.convert_to_numpy(decoder(Y, CONTEXT, initial_state=initial))
    states = initial
    for t in range(Y.shape[1]):
        output_t, states = decoder.step(Y[:, t], states, CONTEXT)
        np.testing.assert_allclose(
            ops.convert_to_numpy(output_t), outputs[:, t], rtol=1e-5, atol=1e-5
        )
    with pytest.raises(ValueError, match="of 4 layers takes 4 initial state"):
        decoder(Y, CONTEXT, initial_state=initial[:1])


def test_harness_stacked():
    run_layer_test(
        PlainDecoder,
        {"units": 8, "cell": "lstm", "num_layers": 3, "layer_dropout": 0.1},
        {"inputs": Y, "context": CONTEXT},
        mask=TARGET_MASK,
        padded_input="inputs",
        mask_kwarg="inputs_mask",
        weights_kwarg=None,
        expected_output_shape=(2, 4, 21),
        atol=1e-5,
        rtol=1e-5,
    )
