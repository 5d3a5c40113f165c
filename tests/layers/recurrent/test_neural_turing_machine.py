import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import NeuralTuringMachine, NTMCell
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.layers.recurrent.test_ntm_cell import cell_params, numpy_state

RNG = np.random.default_rng(5)
X = RNG.normal(size=(2, 5, 3)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])
TOL = {"rtol": 1e-5, "atol": 1e-6}
ARGS = {"controller_units": 4, "memory_size": 6, "memory_width": 3, "output_units": 2}


def numpy_ntm(layer, x, mask):
    """Keras' RNN semantics (masked steps keep the state) over the paper's step, flat state."""
    cell = layer.cell
    params = cell_params(cell)
    sizes = np.cumsum(cell.state_size)[:-1]
    state = np.concatenate(
        [
            keras.ops.convert_to_numpy(s).astype("float64")
            for s in cell.get_initial_state(x.shape[0])
        ],
        -1,
    )

    def step(x_t, flat):
        output, new = ref.ntm_step(x_t, numpy_state(cell, np.split(flat, sizes, -1)), params)
        return output, np.concatenate([s.reshape(len(x_t), -1) for s in new], -1)

    return ref.masked_recurrence(x, mask, step, state)


def test_matches_numpy_over_a_masked_sequence():
    layer = NeuralTuringMachine(**ARGS, num_read_heads=2, return_state=True)
    layer(X)
    layer.set_weights([RNG.normal(scale=0.7, size=w.shape) for w in layer.get_weights()])
    outputs, *states = layer(X, mask=MASK)
    expected, expected_state = numpy_ntm(layer, X, MASK)
    np.testing.assert_allclose(ops.convert_to_numpy(outputs), expected, **TOL)
    np.testing.assert_allclose(
        np.concatenate([ops.convert_to_numpy(s) for s in states], -1), expected_state, **TOL
    )


def test_attributes_read_the_cell():
    layer = NeuralTuringMachine(**ARGS, shift_range=2, clip_value=None)
    assert isinstance(layer.cell, NTMCell)
    assert (layer.memory_size, layer.shift_range, layer.clip_value) == (6, 2, None)
    assert layer.return_sequences


def test_padding_values_do_not_matter_through_embedding_mask():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 3, mask_zero=True)(tokens)
    model = keras.Model(tokens, NeuralTuringMachine(**ARGS, return_sequences=False)(embedded))
    a = ops.convert_to_numpy(model(np.array([[3, 4, 0, 0]])))
    b = ops.convert_to_numpy(model(np.array([[3, 4]])))
    np.testing.assert_allclose(a, b, **TOL)


def test_bad_arguments():
    with pytest.raises(ValueError, match="memory_width=0"):
        NeuralTuringMachine(4, memory_width=0)


@pytest.mark.parametrize(
    "mask_kwarg", [pytest.param("mask", marks=pytest.mark.every_backend), None]
)
def test_harness(mask_kwarg):
    run_layer_test(
        NeuralTuringMachine,
        {
            **ARGS,
            "num_read_heads": 1,
            "num_write_heads": 1,
            "shift_range": 1,
            "clip_value": 20.0,
            "memory_initial_value": 1e-6,
            "return_sequences": True,
            "return_state": True,
        },
        {"sequences": X},
        mask=MASK,
        padded_input="sequences",
        mask_kwarg=mask_kwarg,
        weights_kwarg=None,
        expected_output_shape=((2, 5, 2), (2, 4), (2, 4), (2, 18), (2, 3), (2, 12)),
        run_mixed_precision_check=mask_kwarg is None,
        run_saved_model_check=mask_kwarg is None,
        atol=1e-5,
        rtol=1e-5,
    )
