import numpy as np
import pytest
from keras import ops

from keras_attn.layers import PositionEmbedding
from keras_attn.testing import run_layer_test
from tests.lazy_tf import tf

X = np.random.default_rng(0).normal(size=(2, 5, 6)).astype("float32")


def test_rows_of_the_table():
    layer = PositionEmbedding(max_length=9)
    output = ops.convert_to_numpy(layer(X))
    table = ops.convert_to_numpy(layer.position_embeddings)
    assert table.shape == (9, 6)
    np.testing.assert_array_equal(output[0], table[:5])
    np.testing.assert_array_equal(output[1], table[:5])
    shifted = ops.convert_to_numpy(layer(X, start_index=4))
    np.testing.assert_array_equal(shifted[0], table[4:9])


@pytest.mark.tensorflow_only
def test_one_step_at_start_index_equals_row_of_full_pass():
    layer = PositionEmbedding(max_length=8)
    full = ops.convert_to_numpy(layer(np.zeros((2, 8, 4), "float32")))

    @tf.function
    def step_fn(index):
        return layer(tf.zeros((2, 1, 4)), start_index=index)

    for k in range(8):
        np.testing.assert_array_equal(
            ops.convert_to_numpy(step_fn(tf.constant(k)))[:, 0], full[:, k]
        )
        np.testing.assert_array_equal(
            ops.convert_to_numpy(layer(np.zeros((2, 1, 4), "float32"), start_index=k))[:, 0],
            full[:, k],
        )


@pytest.mark.tensorflow_only
def test_trains():
    layer = PositionEmbedding(max_length=5)
    layer(X)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(X[:, :3]) ** 2)
    grad = ops.convert_to_numpy(tape.gradient(loss, layer.position_embeddings.value))
    assert np.all(grad[:3] != 0) and np.all(grad[3:] == 0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_length=0"):
        PositionEmbedding(max_length=0)
    with pytest.raises(ValueError, match="max_length=True"):
        PositionEmbedding(max_length=True)


@pytest.mark.every_backend
def test_harness():
    run_layer_test(
        PositionEmbedding,
        {"max_length": 7, "initializer": "random_normal"},
        {"inputs": X},
        mask=np.array([[True] * 5, [True, True, True, False, False]]),
        padded_input="inputs",
        weights_kwarg=None,
        expected_output_shape=(2, 5, 6),
    )
