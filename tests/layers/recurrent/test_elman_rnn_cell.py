import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import ElmanRNNCell
from tests import numpy_reference as ref

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(11)


def test_one_step_matches_numpy_and_feeds_back_the_hidden_state():
    cell = ElmanRNNCell(4, output_units=3, output_activation="sigmoid")
    x = RNG.normal(size=(2, 5)).astype("float32")
    h = RNG.normal(size=(2, 4)).astype("float32")
    cell(x, [h])
    cell.set_weights([RNG.normal(size=w.shape) for w in cell.get_weights()])
    output, (state,) = cell(x, [h])
    expected_h = ref.elman_step(
        x,
        h,
        ops.convert_to_numpy(cell.kernel),
        ops.convert_to_numpy(cell.recurrent_kernel),
        ops.convert_to_numpy(cell.bias),
    )
    expected_o = ref.output_projection(
        expected_h,
        ops.convert_to_numpy(cell.output_kernel),
        ops.convert_to_numpy(cell.output_bias),
        ref.sigmoid,
    )
    np.testing.assert_allclose(ops.convert_to_numpy(state), expected_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(output), expected_o, rtol=1e-5, atol=1e-6)
    assert cell.state_size == 4 and cell.output_size == 3


def test_serializes_inside_keras_rnn():
    rnn = keras.layers.RNN(ElmanRNNCell(4, output_units=2, activation="relu"))
    rnn(RNG.normal(size=(2, 3, 5)).astype("float32"))
    clone = keras.layers.RNN.from_config(rnn.get_config())
    assert isinstance(clone.cell, ElmanRNNCell)
    assert clone.cell.output_units == 2
    assert clone.cell.activation is keras.activations.relu


def test_bad_arguments():
    with pytest.raises(ValueError, match="units=1.5"):
        ElmanRNNCell(1.5)
    with pytest.raises(ValueError, match="output_activation='relu'"):
        ElmanRNNCell(3, output_activation="relu")


def test_initializers_reach_the_weights_and_round_trip():
    cell = ElmanRNNCell(
        3,
        output_units=2,
        kernel_initializer="ones",
        recurrent_initializer="identity",
        bias_initializer=keras.initializers.Constant(0.5),
    )
    cell(np.ones((1, 4), "float32"), [np.zeros((1, 3), "float32")])
    np.testing.assert_array_equal(ops.convert_to_numpy(cell.kernel), np.ones((4, 3)))
    np.testing.assert_array_equal(ops.convert_to_numpy(cell.recurrent_kernel), np.eye(3))
    np.testing.assert_array_equal(ops.convert_to_numpy(cell.bias), np.full(3, 0.5))
    np.testing.assert_array_equal(ops.convert_to_numpy(cell.output_kernel), np.ones((3, 2)))
    np.testing.assert_array_equal(ops.convert_to_numpy(cell.output_bias), np.full(2, 0.5))
    clone = ElmanRNNCell.from_config(cell.get_config())
    clone(np.ones((1, 4), "float32"), [np.zeros((1, 3), "float32")])
    np.testing.assert_array_equal(ops.convert_to_numpy(clone.recurrent_kernel), np.eye(3))
    np.testing.assert_array_equal(ops.convert_to_numpy(clone.output_bias), np.full(2, 0.5))


def test_one_initializer_instance_gives_each_weight_its_own_draws():
    cell = ElmanRNNCell(3, output_units=3, kernel_initializer=keras.initializers.GlorotUniform())
    cell(np.ones((1, 3), "float32"), [np.zeros((1, 3), "float32")])
    assert (
        np.abs(ops.convert_to_numpy(cell.kernel) - ops.convert_to_numpy(cell.output_kernel)).max()
        > 1e-3
    )


def test_irnn_carries_a_nonnegative_state_unchanged_at_initialisation():
    """Le et al. (2015): with ReLU, W_h = I and b = 0, h^(t) = relu(x^(t) W_x + h^(t-1)), so a
    zero input leaves a nonnegative state as it is (and dh^(t)/dh^(t-1) = I), step after step;
    the default orthogonal W_h with tanh does not."""
    irnn = keras.layers.RNN(
        ElmanRNNCell(5, activation="relu", recurrent_initializer="identity"),
        return_sequences=True,
    )
    h0 = np.abs(RNG.normal(size=(2, 5))).astype("float32")
    zeros = np.zeros((2, 30, 4), "float32")
    states = ops.convert_to_numpy(irnn(zeros, initial_state=[h0]))
    np.testing.assert_allclose(states, np.broadcast_to(h0[:, None], states.shape), rtol=1e-6)
    plain = keras.layers.RNN(ElmanRNNCell(5), return_sequences=True)
    faded = ops.convert_to_numpy(plain(zeros, initial_state=[h0]))
    assert np.abs(faded[:, -1]).max() < 0.5 * np.abs(h0).max()
