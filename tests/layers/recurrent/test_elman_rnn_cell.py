import keras
import numpy as np
import pytest

from keras_attn.layers import ElmanRNNCell
from tests import numpy_reference as ref

RNG = np.random.default_rng(11)


def test_one_step_matches_numpy_and_feeds_back_the_hidden_state():
    cell = ElmanRNNCell(4, output_units=3, output_activation="sigmoid")
    x = RNG.normal(size=(2, 5)).astype("float32")
    h = RNG.normal(size=(2, 4)).astype("float32")
    cell(x, [h])
    cell.set_weights([RNG.normal(size=w.shape) for w in cell.get_weights()])
    output, (state,) = cell(x, [h])
    expected_h = ref.elman_step(
        x, h, cell.kernel.numpy(), cell.recurrent_kernel.numpy(), cell.bias.numpy()
    )
    expected_o = ref.output_projection(
        expected_h, cell.output_kernel.numpy(), cell.output_bias.numpy(), ref.sigmoid
    )
    np.testing.assert_allclose(state.numpy(), expected_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(output.numpy(), expected_o, rtol=1e-5, atol=1e-6)
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
