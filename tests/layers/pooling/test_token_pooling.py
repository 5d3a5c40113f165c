import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import TokenPooling
from keras_attn.testing import run_layer_test
from tests.lazy_tf import tf

RNG = np.random.default_rng(7)
X = RNG.normal(size=(4, 6, 3)).astype("float32")
# Right padding of varied lengths (6, 4, 1, 2) and one left-padded row.
MASK = np.array(
    [
        [True] * 6,
        [True] * 4 + [False] * 2,
        [True] + [False] * 5,
        [False, False, True, True, False, False],
    ]
)


def numpy_token_pooling(x, mask, position):
    """Loop reference: the first or last True position of each row, zeros if none."""
    out = np.zeros((x.shape[0], x.shape[2]), x.dtype)
    for b in range(x.shape[0]):
        real = np.flatnonzero(mask[b])
        if real.size:
            out[b] = x[b, real[0] if position == "first" else real[-1]]
    return out


@pytest.mark.parametrize("position", ["first", "last"])
def test_matches_the_numpy_reference(position):
    pooled = ops.convert_to_numpy(TokenPooling(position)(X, mask=MASK))
    np.testing.assert_array_equal(pooled, numpy_token_pooling(X, MASK, position))
    empty = MASK.copy()
    empty[1] = False
    pooled = ops.convert_to_numpy(TokenPooling(position)(X, mask=empty))
    np.testing.assert_array_equal(pooled, numpy_token_pooling(X, empty, position))
    assert np.all(pooled[1] == 0.0)


def test_without_a_mask_first_and_last_positions():
    np.testing.assert_array_equal(ops.convert_to_numpy(TokenPooling("first")(X)), X[:, 0])
    np.testing.assert_array_equal(ops.convert_to_numpy(TokenPooling("last")(X)), X[:, -1])


def test_last_real_token_from_keras_masking_of_ids():
    ids = np.array([[5, 6, 7, 0, 0], [5, 0, 0, 0, 0], [5, 6, 7, 8, 9]], "int32")
    inputs = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(10, 3, mask_zero=True)(inputs)
    model = keras.Model(inputs, TokenPooling("last")(hidden))
    table = ops.convert_to_numpy(model.layers[1].embeddings)
    np.testing.assert_array_equal(ops.convert_to_numpy(model(ids)), table[[7, 5, 9]])


@pytest.mark.tensorflow_only
def test_unknown_shapes_in_a_traced_function():
    layer = TokenPooling("last")
    traced = tf.function(
        layer.call,
        input_signature=[
            tf.TensorSpec((None, None, 3), "float32"),
            tf.TensorSpec((None, None), "bool"),
        ],
    )
    np.testing.assert_array_equal(
        ops.convert_to_numpy(traced(X, MASK)), numpy_token_pooling(X, MASK, "last")
    )


@pytest.mark.tensorflow_only
def test_gradient_reaches_only_the_pooled_position():
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(TokenPooling("last")(x, mask=MASK))
    grad = ops.convert_to_numpy(tape.gradient(loss, x))
    expected = np.zeros_like(X)
    for b, t in enumerate([5, 3, 0, 3]):
        expected[b, t] = 1.0
    np.testing.assert_array_equal(grad, expected)


def test_rejects_an_unknown_position():
    with pytest.raises(ValueError, match="position='middle'"):
        TokenPooling("middle")


@pytest.mark.every_backend
@pytest.mark.parametrize("position", ["first", "last"])
def test_harness(position):
    run_layer_test(
        TokenPooling,
        {"position": position},
        {"inputs": X},
        mask=MASK,
        padded_input="inputs",
        weights_kwarg=None,
        expected_output_shape=(4, 3),
    )
