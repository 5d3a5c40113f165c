import numpy as np
import pytest
from keras import ops

from keras_attn.ops import dimension, leading_shape
from tests.lazy_tf import tf

pytestmark = pytest.mark.every_backend


@pytest.mark.tensorflow_only
def test_static_sizes_are_ints_and_unknown_ones_tensors():
    seen = {}

    @tf.function(input_signature=[tf.TensorSpec([None, 3, 4], tf.float32)])
    def probe(x):
        seen["static"] = dimension(x, 1), dimension(x, -1)
        seen["batch"] = dimension(x, 0)
        return dimension(x, 0)

    assert int(probe(tf.zeros((5, 3, 4)))) == 5
    assert seen["static"] == (3, 4)
    assert isinstance(seen["static"][0], int)
    assert tf.is_tensor(seen["batch"])


@pytest.mark.tensorflow_only
def test_leading_shape_reshapes_back_without_reading_the_shape():
    @tf.function(input_signature=[tf.TensorSpec([None, 2, 3], tf.float32)])
    def flatten_and_back(x):
        leading = leading_shape(x, 1)
        assert leading == (-1, 2)  # traced: no runtime shape needed
        return tf.reshape(tf.reshape(x, (-1, 3)) * 2.0, (*leading, 3))

    x = np.random.default_rng(0).normal(size=(4, 2, 3)).astype("float32")
    np.testing.assert_array_equal(ops.convert_to_numpy(flatten_and_back(x)), 2.0 * x)
    graph = flatten_and_back.get_concrete_function().graph
    assert "Shape" not in {op.type for op in graph.get_operations()}


@pytest.mark.tensorflow_only
def test_leading_shape_with_two_unknown_sizes_reads_them():
    @tf.function(input_signature=[tf.TensorSpec([None, None, 3], tf.float32)])
    def flatten_and_back(x):
        leading = leading_shape(x, 1)
        return tf.reshape(tf.reshape(x, (-1, 3)), (*leading, 3))

    x = np.arange(2 * 5 * 3, dtype="float32").reshape(2, 5, 3)
    np.testing.assert_array_equal(ops.convert_to_numpy(flatten_and_back(x)), x)


def test_static_shapes_and_zero_sizes():
    assert leading_shape(np.zeros((2, 3, 4)), 1) == (2, 3)
    assert leading_shape(np.zeros((2, 3, 4)), 0) == (2, 3, 4)
    assert dimension(np.zeros((2, 0)), 1) == 0


def test_bad_trailing_count():
    with pytest.raises(ValueError, match="trailing=3"):
        leading_shape(np.zeros((2, 3, 4)), 3)
    with pytest.raises(ValueError, match="trailing=-1"):
        leading_shape(np.zeros((2, 3, 4)), -1)


def test_a_functional_model_builds_over_sizes_unknown_until_called():
    # Under JAX, Keras builds a functional model with symbolic sizes (jax.export shape
    # polymorphism): `dimension` and `leading_shape` must pass them through, not call int() on them.
    import keras

    from keras_attn.layers import MultiHeadAttention

    inputs = keras.Input((None, 8))
    outputs = MultiHeadAttention(num_heads=2, key_dim=4)(inputs, inputs)
    model = keras.Model(inputs, outputs)
    assert tuple(model.output.shape) == (None, None, 8)
    x = np.random.default_rng(0).normal(size=(3, 5, 8)).astype("float32")
    assert ops.convert_to_numpy(model(x)).shape == (3, 5, 8)
