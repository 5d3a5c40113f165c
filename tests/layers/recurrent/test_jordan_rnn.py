import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import ElmanRNN, JordanRNN
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(8)
X = RNG.normal(size=(2, 5, 3)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])
TOL = {"rtol": 1e-5, "atol": 1e-6}


def randomize(layer, seed=0):
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(scale=0.5, size=w.shape) for w in layer.get_weights()])


def numpy_jordan(cell, x, mask, act=None, reverse=False):
    """Jordan network: the state fed back is the previous output o^(t-1)."""
    kernel, recurrent, bias = (
        ops.convert_to_numpy(cell.kernel),
        ops.convert_to_numpy(cell.recurrent_kernel),
        ops.convert_to_numpy(cell.bias),
    )
    output_kernel, output_bias = (
        ops.convert_to_numpy(cell.output_kernel),
        ops.convert_to_numpy(cell.output_bias),
    )

    def step(x_t, o_previous):
        h = ref.elman_step(x_t, o_previous, kernel, recurrent, bias)
        o = ref.output_projection(h, output_kernel, output_bias, act)
        return o, o

    o0 = np.zeros((x.shape[0], cell.output_units))
    return ref.masked_recurrence(x, mask, step, o0, reverse=reverse)


@pytest.mark.parametrize("output_activation", [None, "sigmoid"])
def test_matches_numpy_output_feedback(output_activation):
    layer = JordanRNN(
        6,
        output_units=2,
        output_activation=output_activation,
        return_sequences=True,
        return_state=True,
    )
    layer(X)
    randomize(layer)
    outputs, state = layer(X, mask=MASK)
    act = None if output_activation is None else ref.sigmoid
    expected, expected_state = numpy_jordan(layer.cell, X, MASK, act)
    np.testing.assert_allclose(ops.convert_to_numpy(outputs), expected, **TOL)
    np.testing.assert_allclose(ops.convert_to_numpy(state), expected_state, **TOL)
    # The carried state is the last real output.
    np.testing.assert_allclose(
        ops.convert_to_numpy(state)[1], ops.convert_to_numpy(outputs)[1, 2], **TOL
    )


def test_recurrent_kernel_reads_the_output_not_the_hidden_layer():
    layer = JordanRNN(6, output_units=2)
    layer(X)
    assert tuple(layer.cell.recurrent_kernel.shape) == (2, 6)
    assert layer.cell.state_size == 2
    elman = ElmanRNN(6, output_units=2)
    elman(X)
    assert tuple(elman.cell.recurrent_kernel.shape) == (6, 6)


def test_bidirectional_matches_numpy_both_directions():
    bi = keras.layers.Bidirectional(
        JordanRNN(6, output_units=2, return_sequences=True), merge_mode="sum"
    )
    bi(X)
    randomize(bi)
    got = ops.convert_to_numpy(bi(X, mask=MASK))
    forward, _ = numpy_jordan(bi.forward_layer.cell, X, MASK)
    backward, _ = numpy_jordan(bi.backward_layer.cell, X, MASK, reverse=True)
    valid = MASK[:, :, None]
    np.testing.assert_allclose(
        np.where(valid, got, 0), np.where(valid, forward + backward, 0), **TOL
    )


def test_initial_state_is_the_first_fed_back_output():
    layer = JordanRNN(6, output_units=2, return_sequences=True)
    layer(X)
    randomize(layer)
    o0 = RNG.normal(size=(2, 2)).astype("float32")
    got = ops.convert_to_numpy(layer(X[:, :1], initial_state=[o0]))
    cell = layer.cell
    h = ref.elman_step(
        X[:, 0],
        o0,
        ops.convert_to_numpy(cell.kernel),
        ops.convert_to_numpy(cell.recurrent_kernel),
        ops.convert_to_numpy(cell.bias),
    )
    expected = h @ ops.convert_to_numpy(cell.output_kernel) + ops.convert_to_numpy(cell.output_bias)
    np.testing.assert_allclose(got[:, 0], expected, **TOL)


def test_bad_arguments():
    with pytest.raises(ValueError, match="output_units=None"):
        JordanRNN(4, output_units=None)
    with pytest.raises(ValueError, match="units=-2"):
        JordanRNN(-2, output_units=3)


@pytest.mark.every_backend
def test_harness():
    run_layer_test(
        JordanRNN,
        {
            "units": 6,
            "output_units": 2,
            "activation": "tanh",
            "output_activation": "tanh",
            "return_sequences": True,
        },
        {"sequences": X},
        mask=MASK,
        padded_input="sequences",
        mask_kwarg=None,
        weights_kwarg=None,
        expected_output_shape=(2, 5, 2),
        atol=1e-5,
        rtol=1e-5,
    )
