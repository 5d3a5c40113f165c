import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.ops import scale_gradient
from tests.lazy_tf import tf

pytestmark = pytest.mark.every_backend

RNG = np.random.default_rng(3)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("scale", [0.25, 3.0])
def test_value_is_unchanged_and_gradient_scaled(scale):
    x = tf.constant(RNG.normal(size=(3, 4)).astype("float32"))
    upstream = RNG.normal(size=(3, 4)).astype("float32")
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = scale_gradient(x, scale)
        loss = tf.reduce_sum(y * upstream)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(y), ops.convert_to_numpy(x)
    )  # bit for bit, not approximately
    np.testing.assert_allclose(
        ops.convert_to_numpy(tape.gradient(loss, x)), scale * upstream, rtol=1e-6
    )


@pytest.mark.tensorflow_only
def test_keras_variable_and_float16():
    variable = keras.Variable(RNG.normal(size=(5,)).astype("float32"))
    with tf.GradientTape() as tape:
        y = scale_gradient(keras.ops.cast(variable, "float16"), 0.5)
        loss = tf.reduce_sum(tf.cast(y, "float32") ** 2)
    assert y.dtype == tf.float16
    np.testing.assert_array_equal(
        ops.convert_to_numpy(y), ops.convert_to_numpy(variable).astype("float16")
    )
    expected = 0.5 * 2 * ops.convert_to_numpy(variable).astype("float16").astype("float32")
    np.testing.assert_allclose(
        ops.convert_to_numpy(tape.gradient(loss, variable.value)), expected, rtol=1e-3
    )


@pytest.mark.tensorflow_only
def test_scale_one_is_the_identity():
    x = tf.constant([1.0, 2.0])
    assert scale_gradient(x, 1.0) is x
