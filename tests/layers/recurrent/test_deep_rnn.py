import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import DeepRNN
from keras_attn.testing import run_layer_test

RNG = np.random.default_rng(7)
X = RNG.normal(size=(2, 5, 4)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])
KERAS_RNN = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
TOL = {"rtol": 1e-5, "atol": 1e-6}


def _manual_chain(rnn, cell, widths, x, mask, residual, bidirectional=False, merge_mode="concat"):
    """Keras layers chained by hand with `rnn`'s weights copied in: (top sequence, states)."""
    sequence, states = x, []
    for index, (units, ours) in enumerate(zip(widths, rnn.rnn_layers, strict=True)):
        layer = KERAS_RNN[cell](units, return_sequences=True, return_state=True)
        if bidirectional:
            layer = keras.layers.Bidirectional(layer, merge_mode=merge_mode)
        layer(sequence, mask=mask)
        layer.set_weights(ours.get_weights())
        outputs = [ops.convert_to_numpy(o) for o in layer(sequence, mask=mask)]
        if bidirectional:
            half = (len(outputs) - 1) // 2
            states += [
                np.concatenate([f, b], -1)
                for f, b in zip(outputs[1 : 1 + half], outputs[1 + half :], strict=True)
            ]
        else:
            states += outputs[1:]
        if residual and index > 0 and outputs[0].shape[-1] == sequence.shape[-1]:
            sequence = outputs[0] + sequence
        else:
            sequence = outputs[0]
    return sequence, states


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("residual", [False, True])
def test_equals_chained_keras_layers_with_copied_weights(cell, residual):
    rnn = DeepRNN([6, 6, 6], cell=cell, residual=residual)
    sequence, *states = rnn(X, mask=MASK)
    expected_sequence, expected_states = _manual_chain(rnn, cell, [6, 6, 6], X, MASK, residual)
    valid = MASK[:, :, None]
    np.testing.assert_allclose(
        ops.convert_to_numpy(sequence), np.where(valid, expected_sequence, 0), **TOL
    )
    assert len(states) == len(expected_states) == (6 if cell == "lstm" else 3)
    for got, want in zip(states, expected_states, strict=True):
        np.testing.assert_allclose(ops.convert_to_numpy(got), want, **TOL)


def test_residual_changes_the_output_and_skips_unequal_widths():
    plain = DeepRNN([4, 6, 6])
    plain(X)
    residual = DeepRNN([4, 6, 6], residual=True)
    residual(X)
    residual.set_weights(plain.get_weights())
    assert residual._residual_at == [False, False, True]
    difference = ops.convert_to_numpy(residual(X)[0]) - ops.convert_to_numpy(plain(X)[0])
    assert np.abs(difference).max() > 1e-3


@pytest.mark.parametrize("merge_mode", ["concat", "sum", "mul", "ave"])
def test_bidirectional_layers_equal_chained_keras_bidirectional(merge_mode):
    rnn = DeepRNN(3, num_layers=2, cell="gru", bidirectional=True, merge_mode=merge_mode)
    sequence, *states = rnn(X, mask=MASK)
    expected_sequence, expected_states = _manual_chain(
        rnn, "gru", [3, 3], X, MASK, False, bidirectional=True, merge_mode=merge_mode
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(sequence), np.where(MASK[:, :, None], expected_sequence, 0), **TOL
    )
    for got, want in zip(states, expected_states, strict=True):
        assert got.shape == (2, 6)
        np.testing.assert_allclose(ops.convert_to_numpy(got), want, **TOL)


def test_mixed_bidirectional_per_layer():
    rnn = DeepRNN([3, 5], bidirectional=[True, False])
    sequence, *states = rnn(X)
    assert sequence.shape == (2, 5, 5)
    assert [tuple(s.shape) for s in states] == [(2, 6), (2, 6), (2, 5), (2, 5)]
    assert isinstance(rnn.rnn_layers[0], keras.layers.Bidirectional)
    assert isinstance(rnn.rnn_layers[1], keras.layers.LSTM)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_mask_final_states_are_those_of_the_last_real_step(bidirectional):
    rnn = DeepRNN(4, num_layers=2, residual=True, bidirectional=bidirectional)
    sequence, *states = rnn(X, mask=MASK)
    # Row 1 has 3 real steps: running it alone, truncated, must give the same states.
    short_sequence, *short_states = rnn(X[1:, :3])
    for got, want in zip(states, short_states, strict=True):
        np.testing.assert_allclose(ops.convert_to_numpy(got)[1:], ops.convert_to_numpy(want), **TOL)
    np.testing.assert_allclose(
        ops.convert_to_numpy(sequence)[1:, :3], ops.convert_to_numpy(short_sequence), **TOL
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(sequence)[1, 3:], 0.0)


def test_padded_steps_do_not_depend_on_pad_values():
    rnn = DeepRNN(4, num_layers=3, residual=True, bidirectional=[True, False, False])
    clean = [ops.convert_to_numpy(t) for t in rnn(X, mask=MASK)]
    noisy_x = np.where(MASK[:, :, None], X, 1e3 * RNG.normal(size=X.shape)).astype("float32")
    noisy = [ops.convert_to_numpy(t) for t in rnn(noisy_x, mask=MASK)]
    for got, want in zip(noisy, clean, strict=True):
        np.testing.assert_allclose(got, want, **TOL)


def test_template_cell_is_cloned_per_layer():
    template = keras.layers.SimpleRNN(2, activation="relu")
    rnn = DeepRNN([3, 5], cell=template)
    sequence, *states = rnn(X)
    assert sequence.shape == (2, 5, 5)
    assert [layer.units for layer in rnn.rnn_layers] == [3, 5]
    assert all(layer.cell.activation is keras.activations.relu for layer in rnn.rnn_layers)
    assert rnn.states_per_layer == [1, 1]
    revived = DeepRNN.from_config(rnn.get_config())
    revived(X)
    revived.set_weights(rnn.get_weights())
    np.testing.assert_allclose(
        ops.convert_to_numpy(revived(X)[0]), ops.convert_to_numpy(sequence), **TOL
    )


def test_dropout_only_between_layers():
    rnn = DeepRNN(4, num_layers=3, dropout=[0.5, 0.25])
    rnn(X)
    assert [layer.rate for layer in rnn.dropout_layers] == [0.5, 0.25]
    keras.utils.set_random_seed(0)
    dropped = ops.convert_to_numpy(rnn(X, training=True)[0])
    np.testing.assert_allclose(
        ops.convert_to_numpy(rnn(X, training=False)[0]), ops.convert_to_numpy(rnn(X)[0]), **TOL
    )
    assert np.abs(dropped - ops.convert_to_numpy(rnn(X)[0])).max() > 1e-3
    single = DeepRNN(4, num_layers=1, dropout=[])
    single(X)
    np.testing.assert_allclose(
        ops.convert_to_numpy(single(X, training=True)[0]), ops.convert_to_numpy(single(X)[0]), **TOL
    )


def test_wraps_keras_layers_and_passes_use_cudnn():
    rnn = DeepRNN(4, cell="gru", bidirectional=[True, False], use_cudnn=True)
    rnn.build(X.shape)  # no call: this machine has no GPU, and use_cudnn=True demands one
    assert type(rnn.rnn_layers[0].forward_layer) is keras.layers.GRU
    assert rnn.rnn_layers[0].forward_layer.use_cudnn is True
    assert rnn.rnn_layers[1].use_cudnn is True
    rnn.set_use_cudnn(False)
    assert rnn.use_cudnn is False
    assert rnn.rnn_layers[0].forward_layer.use_cudnn is False
    assert rnn.rnn_layers[0].backward_layer.use_cudnn is False
    assert rnn.rnn_layers[1].use_cudnn is False


def test_bad_arguments():
    with pytest.raises(ValueError, match="cell='rnn'"):
        DeepRNN(4, cell="rnn")
    with pytest.raises(ValueError, match="Dense"):
        DeepRNN(4, cell=keras.layers.Dense(3))
    with pytest.raises(ValueError, match="merge_mode='max'"):
        DeepRNN(4, merge_mode="max")
    with pytest.raises(ValueError, match=r"units=\[4, 0\]"):
        DeepRNN([4, 0])
    with pytest.raises(ValueError, match="num_layers=3"):
        DeepRNN([4, 4], num_layers=3)
    with pytest.raises(ValueError, match=r"dropout=\[0.1\]"):
        DeepRNN(4, num_layers=3, dropout=[0.1])
    with pytest.raises(ValueError, match=r"bidirectional=\[True\]"):
        DeepRNN(4, num_layers=2, bidirectional=[True])


@pytest.mark.parametrize(
    "init_kwargs,shapes",
    [
        pytest.param(
            {"units": 4, "num_layers": 2, "cell": "lstm", "residual": True, "dropout": 0.1},
            ((2, 5, 4), (2, 4), (2, 4), (2, 4), (2, 4)),
            marks=pytest.mark.every_backend,
        ),
        (
            {"units": [3, 6], "cell": "gru", "bidirectional": [True, False], "merge_mode": "sum"},
            ((2, 5, 6), (2, 6), (2, 6)),
        ),
    ],
)
def test_harness(init_kwargs, shapes):
    run_layer_test(
        DeepRNN,
        {**init_kwargs, "use_cudnn": "auto"},
        {"inputs": X},
        mask=MASK,
        padded_input="inputs",
        mask_kwarg=None,
        weights_kwarg=None,
        expected_output_shape=shapes,
        atol=1e-5,
        rtol=1e-5,
    )
