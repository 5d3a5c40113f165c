import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import NTMCell
from tests import numpy_reference as ref
from tests.lazy_tf import tf

RNG = np.random.default_rng(3)
TOL = {"rtol": 1e-5, "atol": 1e-6}
BATCH, N, WIDTH = 3, 7, 4


def call(function, *arrays):
    """A static addressing step of NTMCell on float32 tensors, back as NumPy."""
    tensors = [keras.ops.convert_to_tensor(np.asarray(a, "float32")) for a in arrays]
    return keras.ops.convert_to_numpy(function(*tensors))


def random_weighting(shape):
    w = RNG.uniform(0.0, 1.0, size=shape)
    return (w / w.sum(-1, keepdims=True)).astype("float32")


def cell_params(cell):
    params = {
        "memory_width": cell.memory_width,
        "shift_range": cell.shift_range,
        "num_read_heads": cell.num_read_heads,
        "num_write_heads": cell.num_write_heads,
        "clip_value": cell.clip_value,
        "controller_kernel": ops.convert_to_numpy(cell.controller.kernel),
        "controller_recurrent_kernel": ops.convert_to_numpy(cell.controller.recurrent_kernel),
        "controller_bias": ops.convert_to_numpy(cell.controller.bias),
        "head_kernel": ops.convert_to_numpy(cell.head_parameters.kernel),
        "head_bias": ops.convert_to_numpy(cell.head_parameters.bias),
    }
    if cell.output_units is not None:
        params["output_kernel"] = ops.convert_to_numpy(cell.output_projection.kernel)
        params["output_bias"] = ops.convert_to_numpy(cell.output_projection.bias)
    return params


def numpy_state(cell, states):
    h, c, memory, reads, weights = (keras.ops.convert_to_numpy(s).astype("float64") for s in states)
    heads = cell.num_read_heads + cell.num_write_heads
    return (
        h,
        c,
        memory.reshape(-1, cell.memory_size, cell.memory_width),
        reads,
        weights.reshape(-1, heads, cell.memory_size),
    )


def test_content_addressing_matches_numpy():
    key = RNG.normal(size=(BATCH, WIDTH)).astype("float32")
    beta = RNG.uniform(0, 5, size=(BATCH, 1)).astype("float32")
    memory = RNG.normal(size=(BATCH, N, WIDTH)).astype("float32")
    got = call(NTMCell.content_weights, key, beta, memory)
    np.testing.assert_allclose(got, ref.ntm_content_weights(key, beta, memory), **TOL)
    # The key equal to row 2 gets the largest cosine (1) and so the largest weight.
    same = call(NTMCell.content_weights, memory[:, 2], np.full((BATCH, 1), 50.0), memory)
    np.testing.assert_array_equal(np.argmax(same, -1), [2, 2, 2])


def test_interpolation_shift_and_sharpening_match_numpy():
    content, previous = random_weighting((BATCH, N)), random_weighting((BATCH, N))
    gate = RNG.uniform(size=(BATCH, 1)).astype("float32")
    np.testing.assert_allclose(
        call(NTMCell.interpolate, content, gate, previous),
        ref.ntm_interpolate(content, gate, previous),
        **TOL,
    )
    for r in (0, 1, 2, 4):  # 2r+1 = 9 > N = 7: the shifts wrap around more than once
        shifts = random_weighting((BATCH, 2 * r + 1))
        np.testing.assert_allclose(
            call(NTMCell.shift, content, shifts), ref.ntm_shift(content, shifts), **TOL
        )
    gamma = RNG.uniform(1, 6, size=(BATCH, 1)).astype("float32")
    np.testing.assert_allclose(
        call(NTMCell.sharpen, content, gamma), ref.ntm_sharpen(content, gamma), **TOL
    )


def test_shift_is_circular():
    last = np.zeros((1, N), "float32")
    last[0, -1] = 1.0
    forward = np.array([[0.0, 0.0, 1.0]], "float32")  # s(+1) = 1
    backward = np.array([[1.0, 0.0, 0.0]], "float32")  # s(-1) = 1
    np.testing.assert_array_equal(call(NTMCell.shift, last, forward)[0], np.eye(N)[0])
    np.testing.assert_array_equal(call(NTMCell.shift, last, backward)[0], np.eye(N)[N - 2])
    first = np.eye(N, dtype="float32")[:1]
    np.testing.assert_array_equal(call(NTMCell.shift, first, backward)[0], np.eye(N)[N - 1])


def test_sharpening_a_flat_weighting_stays_finite():
    """w~ = 1/256 and γ = 21 (its clipped maximum): w~^γ = 2^-168 underflows float32 to 0."""
    flat = np.full((1, 256), 1 / 256, "float32")
    got = call(NTMCell.sharpen, flat, np.array([[21.0]], "float32"))
    np.testing.assert_allclose(got, flat, rtol=1e-5)
    assert np.all(flat.astype("float32") ** np.float32(21.0) == 0)  # the naive form is 0/0


def test_read_and_write_match_numpy():
    memory = RNG.normal(size=(BATCH, N, WIDTH)).astype("float32")
    weights = random_weighting((BATCH, 2, N))
    erase = RNG.uniform(size=(BATCH, 2, WIDTH)).astype("float32")
    add = RNG.normal(size=(BATCH, 2, WIDTH)).astype("float32")
    np.testing.assert_allclose(
        call(NTMCell.read, weights[:, 0], memory), ref.ntm_read(weights[:, 0], memory), **TOL
    )
    np.testing.assert_allclose(
        call(NTMCell.write, memory, weights, erase, add),
        ref.ntm_write(memory, weights, erase, add),
        **TOL,
    )
    # A full erase at a one-hot location empties that row before the add.
    one_hot = np.eye(N, dtype="float32")[None, None, 3].repeat(BATCH, 0)
    ones = np.ones((BATCH, 1, WIDTH), "float32")
    written = call(NTMCell.write, memory, one_hot, ones, 2 * ones)
    np.testing.assert_array_equal(written[:, 3], 2 * ones[:, 0])
    np.testing.assert_array_equal(np.delete(written, 3, 1), np.delete(memory, 3, 1))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_read_heads": 1, "num_write_heads": 1, "shift_range": 1, "output_units": 3},
        {"num_read_heads": 2, "num_write_heads": 2, "shift_range": 2, "clip_value": 0.5},
    ],
)
def test_steps_match_numpy_equations(kwargs):
    cell = NTMCell(5, memory_size=N, memory_width=WIDTH, **kwargs)
    x = RNG.normal(size=(BATCH, 6)).astype("float32")
    cell.build(x.shape)
    cell.set_weights([RNG.normal(scale=0.7, size=w.shape) for w in cell.get_weights()])
    states = cell.get_initial_state(BATCH)
    expected_state = numpy_state(cell, states)
    params = cell_params(cell)
    for _ in range(3):  # three steps: memory, reads and weightings are fed back
        output, states = cell(x, states)
        expected_output, expected_state = ref.ntm_step(x, expected_state, params)
        np.testing.assert_allclose(ops.convert_to_numpy(output), expected_output, **TOL)
        for got, expected in zip(numpy_state(cell, states), expected_state, strict=True):
            np.testing.assert_allclose(got, expected, **TOL)
    assert output.shape[-1] == cell.output_size


def test_initial_state():
    cell = NTMCell(4, memory_size=5, memory_width=3, num_read_heads=2, memory_initial_value=0.25)
    h, c, memory, reads, weights = (ops.convert_to_numpy(s) for s in cell.get_initial_state(2))
    assert [s.shape[-1] for s in (h, c, memory, reads, weights)] == cell.state_size
    np.testing.assert_array_equal(memory, np.full((2, 15), 0.25))
    np.testing.assert_array_equal(weights.reshape(2, 3, 5), np.tile(np.eye(5)[0], (2, 3, 1)))
    assert not h.any() and not c.any() and not reads.any()


@pytest.mark.parametrize("dtype", ["float32", "mixed_float16"])
def test_weightings_are_distributions(dtype):
    """Large random weights (saturated gates, β and γ at the clip) still give w >= 0, Σ w = 1."""
    cell = NTMCell(6, memory_size=N, memory_width=WIDTH, num_read_heads=2, dtype=dtype)
    rnn = keras.layers.RNN(cell, return_state=True, dtype=dtype)
    x = RNG.normal(size=(BATCH, 12, 5)).astype("float32")
    rnn(x)
    rnn.set_weights([RNG.normal(scale=5.0, size=w.shape) for w in rnn.get_weights()])
    outputs = rnn(x)
    weights = keras.ops.convert_to_numpy(outputs[-1]).astype("float32").reshape(BATCH, 3, N)
    assert keras.backend.standardize_dtype(outputs[0].dtype) == cell.compute_dtype
    assert np.all(weights >= 0)
    tol = 1e-5 if dtype == "float32" else 2e-3
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=tol)
    assert all(np.isfinite(keras.ops.convert_to_numpy(o).astype("float32")).all() for o in outputs)


def test_mixed_float16_close_to_float32():
    x = RNG.normal(size=(BATCH, 8, 5)).astype("float32")
    reference = keras.layers.RNN(NTMCell(6, memory_size=N, memory_width=WIDTH, output_units=2))
    half = keras.layers.RNN(
        NTMCell(6, memory_size=N, memory_width=WIDTH, output_units=2, dtype="mixed_float16"),
        dtype="mixed_float16",
    )
    reference(x)
    half(x)
    half.set_weights(reference.get_weights())
    got = half(x)
    assert keras.backend.standardize_dtype(got.dtype) == "float16"
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(got).astype("float32"),
        ops.convert_to_numpy(reference(x)),
        atol=1e-2,
    )


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("memory_initial_value", [0.0, 1e-6])
def test_gradients_are_finite(memory_initial_value):
    """Zero memory rows (cosine of a zero vector) and saturated erasures keep gradients finite."""
    cell = NTMCell(6, memory_size=N, memory_width=WIDTH, memory_initial_value=memory_initial_value)
    rnn = keras.layers.RNN(cell, return_sequences=True)
    x = RNG.normal(size=(BATCH, 10, 5)).astype("float32")
    rnn(x)
    rnn.set_weights([RNG.normal(scale=4.0, size=w.shape) for w in rnn.get_weights()])
    with tf.GradientTape() as tape:
        loss = keras.ops.sum(keras.ops.square(rnn(x)))
    gradients = tape.gradient(loss, rnn.trainable_weights)
    assert len(gradients) == len(rnn.trainable_weights) == 5
    for weight, gradient in zip(rnn.trainable_weights, gradients, strict=True):
        assert np.isfinite(ops.convert_to_numpy(gradient)).all(), weight.path
        assert np.abs(ops.convert_to_numpy(gradient)).sum() > 0, weight.path


def test_keras_rnn_wrapper_round_trips(tmp_path):
    inputs = keras.Input((None, 5))
    rnn = keras.layers.RNN(
        NTMCell(6, memory_size=N, memory_width=WIDTH, num_write_heads=2, output_units=3),
        return_sequences=True,
    )
    model = keras.Model(inputs, rnn(inputs))
    model.set_weights([RNG.normal(scale=0.5, size=w.shape) for w in model.get_weights()])
    x = RNG.normal(size=(2, 4, 5)).astype("float32")
    expected = ops.convert_to_numpy(model(x))
    clone = keras.layers.RNN.from_config(rnn.get_config())
    assert isinstance(clone.cell, NTMCell)
    assert clone.cell.get_config() == rnn.cell.get_config()
    path = tmp_path / "ntm.keras"
    model.save(path)
    np.testing.assert_allclose(
        ops.convert_to_numpy(keras.saving.load_model(path)(x)), expected, **TOL
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="controller_units=0"):
        NTMCell(0)
    with pytest.raises(ValueError, match="memory_size=2.5"):
        NTMCell(4, memory_size=2.5)
    with pytest.raises(ValueError, match="num_write_heads=0"):
        NTMCell(4, num_write_heads=0)
    with pytest.raises(ValueError, match="shift_range=-1"):
        NTMCell(4, shift_range=-1)
    with pytest.raises(ValueError, match="output_units=0"):
        NTMCell(4, output_units=0)
    with pytest.raises(ValueError, match="clip_value=-1"):
        NTMCell(4, clip_value=-1)
    with pytest.raises(ValueError, match="memory_initial_value='zero'"):
        NTMCell(4, memory_initial_value="zero")
