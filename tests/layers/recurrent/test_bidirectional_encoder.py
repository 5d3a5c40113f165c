import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import BidirectionalEncoder
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(4)
X = RNG.normal(size=(2, 5, 3)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])


def test_matches_numpy_lstm_both_directions():
    encoder = BidirectionalEncoder(4)
    sequence, h, c = encoder(X, mask=MASK)
    forward, backward = encoder.rnn.forward_layer.cell, encoder.rnn.backward_layer.cell

    def weights(cell):
        return (
            ops.convert_to_numpy(cell.kernel),
            ops.convert_to_numpy(cell.recurrent_kernel),
            ops.convert_to_numpy(cell.bias),
        )

    f_out, f_h, f_c = ref.lstm_sequence(X, MASK, *weights(forward))
    b_out, b_h, b_c = ref.lstm_sequence(X, MASK, *weights(backward), reverse=True)
    expected = np.concatenate([f_out, b_out], -1)
    valid = MASK[:, :, None]
    np.testing.assert_allclose(
        np.where(valid, ops.convert_to_numpy(sequence), 0),
        np.where(valid, expected, 0),
        rtol=1e-5,
        atol=1e-6,
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(h), np.concatenate([f_h, b_h], -1), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(c), np.concatenate([f_c, b_c], -1), rtol=1e-5, atol=1e-6
    )


NUMPY_MERGE = {
    "concat": lambda f, b: np.concatenate([f, b], -1),
    "sum": lambda f, b: f + b,
    "mul": lambda f, b: f * b,
    "ave": lambda f, b: (f + b) / 2,
}


@pytest.mark.parametrize("merge_mode", sorted(NUMPY_MERGE))
def test_every_merge_mode_matches_numpy(merge_mode):
    """Forward and backward NumPy LSTMs, merged per step by each merge mode."""
    encoder = BidirectionalEncoder(4, merge_mode=merge_mode)
    sequence, h, c = encoder(X, mask=MASK)
    forward, backward = encoder.rnn.forward_layer.cell, encoder.rnn.backward_layer.cell

    def weights(cell):
        return (
            ops.convert_to_numpy(cell.kernel),
            ops.convert_to_numpy(cell.recurrent_kernel),
            ops.convert_to_numpy(cell.bias),
        )

    f_out, f_h, f_c = ref.lstm_sequence(X, MASK, *weights(forward))
    b_out, b_h, b_c = ref.lstm_sequence(X, MASK, *weights(backward), reverse=True)
    expected = NUMPY_MERGE[merge_mode](f_out, b_out)
    assert sequence.shape == expected.shape
    valid = MASK[:, :, None]
    np.testing.assert_allclose(
        np.where(valid, ops.convert_to_numpy(sequence), 0),
        np.where(valid, expected, 0),
        rtol=1e-5,
        atol=1e-6,
    )
    # The final states are concatenated whatever the merge of the sequence.
    np.testing.assert_allclose(
        ops.convert_to_numpy(h), np.concatenate([f_h, b_h], -1), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(c), np.concatenate([f_c, b_c], -1), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    "cell,merge_mode", [("lstm", "concat"), ("gru", "sum"), ("gru", "ave"), ("gru", "mul")]
)
def test_equals_keras_bidirectional_with_copied_weights(cell, merge_mode):
    encoder = BidirectionalEncoder(4, cell=cell, merge_mode=merge_mode)
    sequence, *states = encoder(X, mask=MASK)
    rnn = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}[cell]
    keras_bi = keras.layers.Bidirectional(
        rnn(4, return_sequences=True, return_state=True), merge_mode=merge_mode
    )
    keras_bi(X, mask=MASK)
    keras_bi.set_weights(encoder.rnn.get_weights())
    theirs = keras_bi(X, mask=MASK)
    np.testing.assert_allclose(
        ops.convert_to_numpy(sequence), ops.convert_to_numpy(theirs[0]), rtol=1e-5, atol=1e-6
    )
    n = len(states)
    expected_h = np.concatenate(
        [ops.convert_to_numpy(theirs[1]), ops.convert_to_numpy(theirs[1 + n])], -1
    )
    np.testing.assert_allclose(ops.convert_to_numpy(states[0]), expected_h, rtol=1e-5, atol=1e-6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="cell='rnn'"):
        BidirectionalEncoder(4, cell="rnn")
    with pytest.raises(ValueError, match="merge_mode='max'"):
        BidirectionalEncoder(4, merge_mode="max")


def test_set_use_cudnn_reaches_both_directions():
    encoder = BidirectionalEncoder(4)
    encoder.set_use_cudnn(False)
    assert encoder.rnn.forward_layer.use_cudnn is False
    assert encoder.rnn.backward_layer.use_cudnn is False


@pytest.mark.every_backend
def test_harness():
    run_layer_test(
        BidirectionalEncoder,
        {"units": 4, "cell": "lstm", "merge_mode": "concat", "dropout": 0.0, "use_cudnn": "auto"},
        {"inputs": X},
        mask=MASK,
        padded_input="inputs",
        mask_kwarg="mask",
        weights_kwarg=None,
        expected_output_shape=((2, 5, 8), (2, 8), (2, 8)),
        atol=1e-5,
        rtol=1e-5,
    )


def numpy_stacked_encoder(encoder, x, mask):
    """Stacked bidirectional LSTM layers, residual connections from the third layer up."""

    def weights(cell):
        return (
            ops.convert_to_numpy(cell.kernel),
            ops.convert_to_numpy(cell.recurrent_kernel),
            ops.convert_to_numpy(cell.bias),
        )

    states, inputs = [], x
    for index, rnn in enumerate([encoder.rnn, *encoder.upper_rnns]):
        f_out, f_h, f_c = ref.lstm_sequence(inputs, mask, *weights(rnn.forward_layer.cell))
        b_out, b_h, b_c = ref.lstm_sequence(
            inputs, mask, *weights(rnn.backward_layer.cell), reverse=True
        )
        sequence = np.concatenate([f_out, b_out], -1)
        inputs = sequence + inputs if index >= 2 else sequence
        states += [np.concatenate([f_h, b_h], -1), np.concatenate([f_c, b_c], -1)]
    return inputs, states


@pytest.mark.parametrize("num_layers", [2, 4])
def test_stacked_layers_match_numpy(num_layers):
    encoder = BidirectionalEncoder(4, num_layers=num_layers, layer_dropout=0.5)
    sequence, *states = encoder(X, mask=MASK)
    assert encoder.num_states == len(states) == 2 * num_layers and encoder.states_per_layer == 2
    expected, expected_states = numpy_stacked_encoder(encoder, X, MASK)
    valid = MASK[:, :, None]
    np.testing.assert_allclose(
        np.where(valid, ops.convert_to_numpy(sequence), 0),
        np.where(valid, expected, 0),
        rtol=1e-4,
        atol=1e-5,
    )
    for ours, theirs in zip(states, expected_states, strict=True):
        np.testing.assert_allclose(ops.convert_to_numpy(ours), theirs, rtol=1e-4, atol=1e-5)


def test_stacked_layers_depth_config_and_cudnn_switch():
    assert "num_layers" not in BidirectionalEncoder(4).get_config()
    encoder = BidirectionalEncoder(4, cell="gru", num_layers=3, layer_dropout=0.2)
    config = encoder.get_config()
    assert (config["num_layers"], config["layer_dropout"]) == (3, 0.2)
    sequence, *states = BidirectionalEncoder.from_config(config)(X, mask=MASK)
    assert tuple(sequence.shape) == (2, 5, 8) and [tuple(s.shape) for s in states] == [(2, 8)] * 3
    encoder.set_use_cudnn(False)
    for rnn in [encoder.rnn, *encoder.upper_rnns]:
        assert rnn.forward_layer.use_cudnn is False and rnn.backward_layer.use_cudnn is False
    with pytest.raises(ValueError, match="num_layers=0"):
        BidirectionalEncoder(4, num_layers=0)
    with pytest.raises(ValueError, match="layer_dropout=1.5"):
        BidirectionalEncoder(4, num_layers=2, layer_dropout=1.5)


def test_harness_stacked():
    run_layer_test(
        BidirectionalEncoder,
        {"units": 4, "cell": "gru", "num_layers": 3, "layer_dropout": 0.1},
        {"inputs": X},
        mask=MASK,
        padded_input="inputs",
        mask_kwarg="mask",
        weights_kwarg=None,
        expected_output_shape=((2, 5, 8), (2, 8), (2, 8), (2, 8)),
        atol=1e-5,
        rtol=1e-5,
    )
