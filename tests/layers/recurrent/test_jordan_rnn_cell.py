import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import JordanRNNCell
from tests import numpy_reference as ref

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(12)


def test_one_step_matches_numpy_and_feeds_back_the_output():
    cell = JordanRNNCell(4, output_units=3)
    x = RNG.normal(size=(2, 5)).astype("float32")
    o_previous = RNG.normal(size=(2, 3)).astype("float32")
    cell(x, [o_previous])
    cell.set_weights([RNG.normal(size=w.shape) for w in cell.get_weights()])
    output, (state,) = cell(x, [o_previous])
    h = ref.elman_step(
        x,
        o_previous,
        ops.convert_to_numpy(cell.kernel),
        ops.convert_to_numpy(cell.recurrent_kernel),
        ops.convert_to_numpy(cell.bias),
    )
    expected = ref.output_projection(
        h, ops.convert_to_numpy(cell.output_kernel), ops.convert_to_numpy(cell.output_bias)
    )
    np.testing.assert_allclose(ops.convert_to_numpy(output), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ops.convert_to_numpy(state), ops.convert_to_numpy(output))
    assert cell.state_size == 3 and cell.output_size == 3


def test_serializes_inside_keras_rnn():
    rnn = keras.layers.RNN(JordanRNNCell(4, output_units=2, output_activation="tanh"))
    rnn(RNG.normal(size=(2, 3, 5)).astype("float32"))
    clone = keras.layers.RNN.from_config(rnn.get_config())
    assert isinstance(clone.cell, JordanRNNCell)
    assert clone.cell.output_activation is keras.activations.tanh


def test_needs_output_units():
    with pytest.raises(ValueError, match="output_units=None"):
        JordanRNNCell(4, output_units=None)
