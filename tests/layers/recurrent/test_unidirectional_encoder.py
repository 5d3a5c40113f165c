import keras
import numpy as np
import pytest

from keras_attn.layers import UnidirectionalEncoder
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(5)
X = RNG.normal(size=(2, 5, 3)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])
VALID = MASK[:, :, None]
TOL = {"rtol": 1e-5, "atol": 1e-6}


def weights(rnn):
    cell = rnn.cell
    return (
        keras.ops.convert_to_numpy(cell.kernel),
        keras.ops.convert_to_numpy(cell.recurrent_kernel),
        keras.ops.convert_to_numpy(cell.bias),
    )


def numpy_encoder(encoder, x, mask):
    """Stacked NumPy LSTMs, each over the source in the encoder's direction, residual from the
    third layer up; the sequence in source order."""
    states, inputs = [], x
    for index, rnn in enumerate(encoder.rnns):
        out, h, c = ref.lstm_sequence(inputs, mask, *weights(rnn), reverse=encoder.reverse)
        inputs = out + inputs if index >= 2 else out
        states += [h, c]
    return inputs, states


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("num_layers", [1, 2, 4])
def test_matches_numpy_lstm(reverse, num_layers):
    encoder = UnidirectionalEncoder(4, num_layers=num_layers, layer_dropout=0.5, reverse=reverse)
    sequence, *states = encoder(X, mask=MASK)
    assert encoder.num_states == len(states) == 2 * num_layers and encoder.states_per_layer == 2
    expected, expected_states = numpy_encoder(encoder, X, MASK)
    tol = TOL if num_layers == 1 else {"rtol": 1e-4, "atol": 1e-5}
    np.testing.assert_allclose(
        np.where(VALID, keras.ops.convert_to_numpy(sequence), 0),
        np.where(VALID, expected, 0),
        **tol,
    )
    for ours, theirs in zip(states, expected_states, strict=True):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(ours), theirs, **tol)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_reversed_equals_keras_go_backwards_flipped(cell):
    """Keras' RNN with `go_backwards=True` and copied weights, its sequence flipped back."""
    encoder = UnidirectionalEncoder(4, cell=cell, reverse=True)
    sequence, *states = encoder(X, mask=MASK)
    rnn = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}[cell]
    keras_rnn = rnn(4, return_sequences=True, return_state=True, go_backwards=True)
    keras_rnn(X, mask=MASK)
    keras_rnn.set_weights(encoder.rnns[0].get_weights())
    theirs, *their_states = keras_rnn(X, mask=MASK)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(sequence), np.flip(keras.ops.convert_to_numpy(theirs), 1), **TOL
    )
    for ours, expected in zip(states, their_states, strict=True):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(expected), **TOL
        )


@pytest.mark.parametrize("reverse", [False, True])
def test_padded_rows_equal_unpadded_runs(reverse):
    encoder = UnidirectionalEncoder(4, num_layers=3, reverse=reverse)
    sequence, *states = encoder(X, mask=MASK)
    for row, length in enumerate(MASK.sum(1)):
        alone, *alone_states = encoder(X[row : row + 1, :length])
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(sequence)[row, :length],
            keras.ops.convert_to_numpy(alone)[0],
            **TOL,
        )
        for ours, theirs in zip(states, alone_states, strict=True):
            np.testing.assert_allclose(
                keras.ops.convert_to_numpy(ours)[row], keras.ops.convert_to_numpy(theirs)[0], **TOL
            )


def test_reverse_on_abc_equals_forward_on_cba_flipped():
    backward = UnidirectionalEncoder(4, cell="gru", num_layers=3, reverse=True)
    backward(X)
    forward = UnidirectionalEncoder(4, cell="gru", num_layers=3)
    forward(X)
    forward.set_weights(backward.get_weights())
    sequence, *states = backward(X)
    flipped, *flipped_states = forward(np.flip(X, 1))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(sequence), np.flip(keras.ops.convert_to_numpy(flipped), 1), **TOL
    )
    for ours, theirs in zip(states, flipped_states, strict=True):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(theirs), **TOL
        )
    # Reading direction matters: the forward encoder on [a b c] is another result.
    assert not np.allclose(
        keras.ops.convert_to_numpy(forward(X)[0]), keras.ops.convert_to_numpy(sequence), atol=1e-3
    )


def test_bad_arguments_config_and_cudnn_switch():
    with pytest.raises(ValueError, match="cell='rnn'"):
        UnidirectionalEncoder(4, cell="rnn")
    with pytest.raises(ValueError, match="reverse='yes'"):
        UnidirectionalEncoder(4, reverse="yes")
    with pytest.raises(ValueError, match="num_layers=0"):
        UnidirectionalEncoder(4, num_layers=0)
    encoder = UnidirectionalEncoder(4, cell="gru", num_layers=3, layer_dropout=0.2, reverse=True)
    config = encoder.get_config()
    assert (config["num_layers"], config["layer_dropout"], config["reverse"]) == (3, 0.2, True)
    restored = UnidirectionalEncoder.from_config(config)
    assert restored.reverse and all(rnn.go_backwards for rnn in restored.rnns)
    encoder.set_use_cudnn(False)
    assert all(rnn.use_cudnn is False for rnn in encoder.rnns)


@pytest.mark.parametrize(
    "config,state_count",
    [
        pytest.param(
            {"units": 4, "cell": "lstm", "reverse": True}, 2, marks=pytest.mark.every_backend
        ),
        ({"units": 4, "cell": "gru", "num_layers": 3, "layer_dropout": 0.1}, 3),
    ],
)
def test_harness(config, state_count):
    run_layer_test(
        UnidirectionalEncoder,
        config,
        {"inputs": X},
        mask=MASK,
        padded_input="inputs",
        mask_kwarg="mask",
        weights_kwarg=None,
        expected_output_shape=((2, 5, 4),) + ((2, 4),) * state_count,
        atol=1e-5,
        rtol=1e-5,
    )
