import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import NeighbourhoodPooling1D
from keras_attn.testing import run_layer_test
from tests.lazy_tf import tf

RNG = np.random.default_rng(5)
X = RNG.normal(size=(3, 7, 4)).astype("float32")
MASK = np.array(
    [[True] * 7, [True] * 4 + [False] * 3, [False, True, True, False, False, True, True]]
)
MODES = ("max", "average", "weighted", "l2")


def numpy_pooling(x, mask, pool_size, strides, mode, padding, window_logits=None):
    """Loop reference: each window's real steps pooled; zeros for a window without one."""
    batch, length, features = x.shape
    if padding == "valid":
        count, left = max((length - pool_size) // strides + 1, 0), 0
    else:
        count = -(-length // strides)
        left = max((count - 1) * strides + pool_size - length, 0) // 2
    weights = np.ones(pool_size)
    if window_logits is not None:
        weights = np.exp(window_logits) / np.exp(window_logits).sum()
    out = np.zeros((batch, count, features))
    out_mask = np.zeros((batch, count), bool)
    for b in range(batch):
        for j in range(count):
            offsets = [
                o
                for o in range(pool_size)
                if 0 <= j * strides - left + o < length and mask[b, j * strides - left + o]
            ]
            if not offsets:
                continue
            out_mask[b, j] = True
            rows = x[b, [j * strides - left + o for o in offsets]]
            if mode == "max":
                out[b, j] = rows.max(0)
            elif mode == "l2":
                out[b, j] = np.sqrt((rows**2).sum(0))
            else:
                w = weights[offsets] if mode == "weighted" else np.ones(len(offsets))
                out[b, j] = (w[:, None] * rows).sum(0) / w.sum()
    return out, out_mask


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "pool_size, strides, padding",
    [(2, 2, "valid"), (3, 2, "same"), (3, 1, "valid"), (4, 3, "same")],
)
def test_matches_the_numpy_reference_with_a_mask(mode, pool_size, strides, padding):
    layer = NeighbourhoodPooling1D(pool_size, strides, mode=mode, padding=padding)
    layer.build(X.shape)
    logits = None
    if mode == "weighted":
        logits = RNG.normal(size=pool_size).astype("float32")
        layer.window_logits.assign(logits)
    got = ops.convert_to_numpy(layer(X, mask=MASK))
    expected, expected_mask = numpy_pooling(X, MASK, pool_size, strides, mode, padding, logits)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ops.convert_to_numpy(layer.compute_mask(X, MASK)), expected_mask)
    assert got.shape == layer.compute_output_shape(X.shape)


@pytest.mark.parametrize("padding", ["valid", "same"])
@pytest.mark.parametrize(
    "mode, keras_layer",
    [("max", keras.layers.MaxPooling1D), ("average", keras.layers.AveragePooling1D)],
)
def test_max_and_average_equal_keras_pooling_without_a_mask(mode, keras_layer, padding):
    if (mode, padding, keras.backend.backend()) == ("average", "same", "torch"):
        # Keras 3.15's PyTorch AveragePooling1D counts the padding into the mean when it is
        # uneven (pool 4, stride 3 on 7 steps: 0.75 where its TensorFlow and JAX backends give 1).
        pytest.skip("Keras' PyTorch AveragePooling1D averages the padding in")
    for pool_size, strides in [(2, 2), (3, 2), (4, 3)]:
        ours = ops.convert_to_numpy(
            NeighbourhoodPooling1D(pool_size, strides, mode=mode, padding=padding)(X)
        )
        theirs = ops.convert_to_numpy(keras_layer(pool_size, strides, padding=padding)(X))
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


@pytest.mark.tensorflow_only
def test_weighted_starts_as_the_average_and_learns_its_window_weights():
    weighted = NeighbourhoodPooling1D(3, mode="weighted")
    average = NeighbourhoodPooling1D(3, mode="average")
    np.testing.assert_allclose(
        ops.convert_to_numpy(weighted(X)), ops.convert_to_numpy(average(X)), rtol=1e-6, atol=1e-7
    )
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(weighted(x) * tf.constant(RNG.normal(size=(3, 2, 4)), tf.float32))
    gradient = ops.convert_to_numpy(tape.gradient(loss, weighted.window_logits))
    assert np.all(np.isfinite(gradient)) and np.abs(gradient).max() > 1e-3


def test_max_pooling_is_invariant_to_a_shift_inside_the_window():
    x = np.zeros((1, 6, 1), "float32")
    x[0, 0, 0] = 5.0
    shifted = np.roll(x, 1, axis=1)  # the peak moves from step 0 to step 1, same window
    layer = NeighbourhoodPooling1D(3, mode="max")
    np.testing.assert_array_equal(
        ops.convert_to_numpy(layer(x)), ops.convert_to_numpy(layer(shifted))
    )


@pytest.mark.tensorflow_only
def test_l2_has_finite_gradients_at_an_all_zero_window():
    x = tf.constant(np.concatenate([np.zeros((1, 2, 4)), X[:1, :2]], axis=1), tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(NeighbourhoodPooling1D(2, mode="l2")(x))
    gradient = ops.convert_to_numpy(tape.gradient(loss, x))
    assert np.all(np.isfinite(gradient)) and np.all(gradient[0, :2] == 0.0)


@pytest.mark.tensorflow_only
def test_unknown_length_in_a_traced_function_and_the_mask_passes_on():
    layer = NeighbourhoodPooling1D(2, mode="average", padding="same")
    traced = tf.function(
        layer.call,
        input_signature=[tf.TensorSpec((None, None, 4)), tf.TensorSpec((None, None), tf.bool)],
    )
    expected, _ = numpy_pooling(X, MASK, 2, 2, "average", "same")
    np.testing.assert_allclose(
        ops.convert_to_numpy(traced(X, MASK)), expected, rtol=1e-5, atol=1e-6
    )
    ids = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(9, 4, mask_zero=True)(ids)
    pooled = NeighbourhoodPooling1D(2, mode="max")(hidden)
    lstm = keras.layers.LSTM(3, return_sequences=True)(pooled)  # reads the pooled mask
    model = keras.Model(ids, [pooled, lstm])
    out, states = (ops.convert_to_numpy(t) for t in model(np.array([[1, 2, 3, 4, 0, 0]], "int32")))
    assert out.shape == (1, 3, 4) and np.all(out[0, 2] == 0.0)  # (0, 0): no real step
    np.testing.assert_array_equal(states[0, 2], states[0, 1])  # the LSTM skipped it


def test_bad_arguments():
    with pytest.raises(ValueError, match="pool_size=0"):
        NeighbourhoodPooling1D(0)
    with pytest.raises(ValueError, match="strides=-1"):
        NeighbourhoodPooling1D(2, strides=-1)
    with pytest.raises(ValueError, match="mode='median'"):
        NeighbourhoodPooling1D(2, mode="median")
    with pytest.raises(ValueError, match="padding='causal'"):
        NeighbourhoodPooling1D(2, padding="causal")


@pytest.mark.every_backend
@pytest.mark.parametrize("mode", ["max", "weighted"])
def test_harness(mode):
    run_layer_test(
        NeighbourhoodPooling1D,
        {"pool_size": 2, "strides": 2, "mode": mode, "padding": "same"},
        {"inputs": X},
        mask=MASK,
        padded_input="inputs",
        weights_kwarg=None,
        expected_output_shape=(3, 4, 4),
    )
