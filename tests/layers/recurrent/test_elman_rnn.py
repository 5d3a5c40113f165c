import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import ElmanRNN
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.lazy_tf import tf

RNG = np.random.default_rng(7)
X = RNG.normal(size=(2, 5, 3)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])
TOL = {"rtol": 1e-5, "atol": 1e-6}


def randomize(layer, seed=0):
    """Random values (biases included) in every weight, so no term can hide behind a zero."""
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(scale=0.5, size=w.shape) for w in layer.get_weights()])


def numpy_elman(cell, x, mask, reverse=False):
    kernel, recurrent, bias = (
        ops.convert_to_numpy(w) for w in (cell.kernel, cell.recurrent_kernel, cell.bias)
    )
    project = cell.output_units is not None

    def step(x_t, h):
        h = ref.elman_step(x_t, h, kernel, recurrent, bias)
        if not project:
            return h, h
        return ref.output_projection(
            h, ops.convert_to_numpy(cell.output_kernel), ops.convert_to_numpy(cell.output_bias)
        ), h

    h0 = np.zeros((x.shape[0], cell.units))
    return ref.masked_recurrence(x, mask, step, h0, reverse=reverse)


def test_matches_numpy_equations():
    layer = ElmanRNN(4, output_units=2, return_sequences=True, return_state=True)
    layer(X)
    randomize(layer)
    outputs, h = layer(X, mask=MASK)
    expected, expected_h = numpy_elman(layer.cell, X, MASK)
    np.testing.assert_allclose(ops.convert_to_numpy(outputs), expected, **TOL)
    np.testing.assert_allclose(ops.convert_to_numpy(h), expected_h, **TOL)


def test_output_activation_applies_to_the_projection():
    layer = ElmanRNN(4, output_units=2, output_activation="sigmoid", return_sequences=True)
    linear = ElmanRNN(4, output_units=2, return_sequences=True)
    layer(X)
    linear(X)
    randomize(layer)
    linear.set_weights(layer.get_weights())
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(X)),
        1 / (1 + np.exp(-ops.convert_to_numpy(linear(X)))),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("go_backwards", [False, True])
def test_without_projection_equals_keras_simple_rnn(go_backwards):
    ours = ElmanRNN(4, return_sequences=True, go_backwards=go_backwards)
    keras_rnn = keras.layers.SimpleRNN(4, return_sequences=True, go_backwards=go_backwards)
    ours(X)
    keras_rnn(X)
    randomize(ours)
    keras_rnn.set_weights(ours.get_weights())
    np.testing.assert_allclose(
        ops.convert_to_numpy(ours(X, mask=MASK)),
        ops.convert_to_numpy(keras_rnn(X, mask=MASK)),
        **TOL,
    )


def test_summarising_rnn_is_the_last_real_output():
    """return_sequences=False gives o^(T), the output at each row's last real step."""
    sequence_layer = ElmanRNN(4, output_units=2, return_sequences=True)
    summary_layer = ElmanRNN(4, output_units=2)
    sequence_layer(X)
    summary_layer(X)
    randomize(sequence_layer)
    summary_layer.set_weights(sequence_layer.get_weights())
    sequence = ops.convert_to_numpy(sequence_layer(X, mask=MASK))
    summary = ops.convert_to_numpy(summary_layer(X, mask=MASK))
    assert summary.shape == (2, 2)
    np.testing.assert_allclose(summary[0], sequence[0, 4], **TOL)
    np.testing.assert_allclose(summary[1], sequence[1, 2], **TOL)
    unmasked, _ = numpy_elman(summary_layer.cell, X, np.ones_like(MASK))
    assert not np.allclose(summary[1], unmasked[1, 4])


def test_bidirectional_matches_numpy_both_directions_and_round_trips(tmp_path):
    inputs = keras.Input((5, 3))
    mask = keras.Input((5,), dtype="bool")
    bi = keras.layers.Bidirectional(ElmanRNN(4, output_units=2, return_sequences=True))
    model = keras.Model([inputs, mask], bi(inputs, mask=mask))
    randomize(model)
    got = ops.convert_to_numpy(model([X, MASK]))
    forward, _ = numpy_elman(bi.forward_layer.cell, X, MASK)
    backward, _ = numpy_elman(bi.backward_layer.cell, X, MASK, reverse=True)
    valid = MASK[:, :, None]
    expected = np.concatenate([forward, backward], -1)
    np.testing.assert_allclose(np.where(valid, got, 0), np.where(valid, expected, 0), **TOL)
    path = tmp_path / "bi.keras"
    model.save(path)
    np.testing.assert_allclose(
        ops.convert_to_numpy(keras.saving.load_model(path)([X, MASK])), got, **TOL
    )


@pytest.mark.tensorflow_only
def test_bidirectional_returns_both_final_states_and_exports(tmp_path):
    bi = keras.layers.Bidirectional(ElmanRNN(4, output_units=2, return_state=True))
    inputs = keras.Input((5, 3))
    model = keras.Model(inputs, bi(inputs))
    randomize(model)
    summary, forward_h, backward_h = model(X)
    assert tuple(summary.shape) == (2, 4)
    _, expected_forward = numpy_elman(bi.forward_layer.cell, X, np.ones_like(MASK))
    _, expected_backward = numpy_elman(bi.backward_layer.cell, X, np.ones_like(MASK), reverse=True)
    np.testing.assert_allclose(ops.convert_to_numpy(forward_h), expected_forward, **TOL)
    np.testing.assert_allclose(ops.convert_to_numpy(backward_h), expected_backward, **TOL)
    model.export(str(tmp_path / "bi"), verbose=False)
    restored = tf.saved_model.load(str(tmp_path / "bi"))
    for got, want in zip(restored.serve(X), (summary, forward_h, backward_h), strict=True):
        np.testing.assert_allclose(ops.convert_to_numpy(got), ops.convert_to_numpy(want), **TOL)


def test_padding_values_do_not_matter_through_embedding_mask():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 3, mask_zero=True)(tokens)
    model = keras.Model(tokens, ElmanRNN(4, output_units=2)(embedded))
    a = ops.convert_to_numpy(model(np.array([[3, 4, 0, 0]])))
    b = ops.convert_to_numpy(model(np.array([[3, 4]])))
    np.testing.assert_allclose(a, b, **TOL)


def test_bad_arguments():
    with pytest.raises(ValueError, match="units=0"):
        ElmanRNN(0)
    with pytest.raises(ValueError, match="output_units=-1"):
        ElmanRNN(4, output_units=-1)
    with pytest.raises(ValueError, match="output_activation='softmax'"):
        ElmanRNN(4, output_activation="softmax")


@pytest.mark.every_backend
@pytest.mark.parametrize("mask_kwarg", ["mask", None])
def test_harness(mask_kwarg):
    run_layer_test(
        ElmanRNN,
        {
            "units": 4,
            "output_units": 2,
            "activation": "tanh",
            "output_activation": None,
            "return_sequences": True,
            "return_state": True,
        },
        {"sequences": X},
        mask=MASK,
        padded_input="sequences",
        mask_kwarg=mask_kwarg,
        weights_kwarg=None,
        expected_output_shape=((2, 5, 2), (2, 4)),
        atol=1e-5,
        rtol=1e-5,
    )


def test_irnn_initializers_pass_to_the_cell_and_round_trip():
    layer = ElmanRNN(
        4, activation="relu", recurrent_initializer="identity", bias_initializer="ones"
    )
    layer(X)
    np.testing.assert_array_equal(ops.convert_to_numpy(layer.cell.recurrent_kernel), np.eye(4))
    np.testing.assert_array_equal(ops.convert_to_numpy(layer.cell.bias), np.ones(4))
    clone = ElmanRNN.from_config(layer.get_config())
    assert (clone.recurrent_initializer, clone.cell.bias_initializer) == ("identity", "ones")
    clone(X)
    np.testing.assert_array_equal(ops.convert_to_numpy(clone.cell.recurrent_kernel), np.eye(4))


def test_bidirectional_output_reads_both_directions_states():
    """The bidirectional RNN's output equations: h^(t) = [h_fwd^(t); h_bwd^(t)] and
    o^(t) = g(h^(t); theta_out) with one g for both directions, here a Dense over
    `Bidirectional(ElmanRNN(return_sequences=True))`; o^(1) already depends on x^(T)."""
    inputs = keras.Input((5, 3))
    bi = keras.layers.Bidirectional(ElmanRNN(4, return_sequences=True))
    output = keras.layers.Dense(2, activation="sigmoid")
    model = keras.Model(inputs, output(bi(inputs)))
    randomize(model)
    ones = np.ones_like(MASK)
    forward, _ = numpy_elman(bi.forward_layer.cell, X, ones)
    backward, _ = numpy_elman(bi.backward_layer.cell, X, ones, reverse=True)
    hidden = np.concatenate([forward, backward], -1)  # (2, 5, 8)
    kernel, bias = (ops.convert_to_numpy(w) for w in output.weights)
    expected = ref.sigmoid(hidden @ kernel + bias)
    np.testing.assert_allclose(ops.convert_to_numpy(model(X)), expected, **TOL)
    later = X.copy()
    later[:, -1] += 1.0  # only x^(T) changes: o^(1) changes through h_bwd^(1)
    assert np.abs(ops.convert_to_numpy(model(later))[:, 0] - expected[:, 0]).min() > 1e-4
