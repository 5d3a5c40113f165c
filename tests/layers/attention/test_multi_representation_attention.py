import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers.attention.multi_representation_attention import (
    MultiRepresentationAttention,
)
from keras_attn.testing import AttachMask, run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(7)
X = RNG.normal(size=(2, 4, 3, 5)).astype("float32")  # (batch, T, R, d)
MASK = np.array([[True] * 4, [True, True, False, False]])
PRESENT = np.ones((2, 4, 3), bool)
PRESENT[0, 1, 2] = False
PRESENT[0, 3] = False  # a real token with no representation at all


def numpy_dme(x, keep, kernel, bias, attention_vector):
    """Kiela et al. (2018) DME: x'_r = P_r x_r + b_r, alpha = softmax_r(a . x'_r), sum alpha x'."""
    projected = np.einsum("btrd,rdu->btru", x.astype(np.float64), kernel) + bias
    weights = ref.softmax(projected @ attention_vector, keep)
    return np.einsum("btr,btru->btu", weights, projected), weights


def built_layer(units=6):
    layer = MultiRepresentationAttention(units)
    layer.build(X.shape)
    layer.bias.assign(RNG.normal(size=layer.bias.shape).astype("float32"))
    return layer


def test_matches_numpy_reference_with_both_masks():
    layer = built_layer()
    outputs, weights = layer(
        X, mask=MASK, representation_mask=PRESENT, return_attention_scores=True
    )
    keep = MASK[..., None] & PRESENT
    expected, expected_weights = numpy_dme(X, keep, *layer.get_weights())
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(ops.convert_to_numpy(outputs), expected, rtol=1e-5, atol=1e-6)
    assert np.all(ops.convert_to_numpy(weights)[~keep] == 0.0)
    assert np.all(ops.convert_to_numpy(outputs)[1, 2:] == 0.0) and np.all(
        ops.convert_to_numpy(outputs)[0, 3] == 0.0
    )
    np.testing.assert_allclose(ops.convert_to_numpy(weights)[keep.any(-1)].sum(-1), 1.0, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis")
def test_one_representation_equals_keras_dense():
    layer = MultiRepresentationAttention(6)
    outputs, weights = layer(X[:, :, :1], return_attention_scores=True)
    dense = keras.layers.Dense(6)
    dense.build((None, 5))
    dense.set_weights([ops.convert_to_numpy(layer.kernel)[0], ops.convert_to_numpy(layer.bias)[0]])
    np.testing.assert_allclose(ops.convert_to_numpy(weights), 1.0, rtol=1e-6)
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs), ops.convert_to_numpy(dense(X[:, :, 0])), rtol=1e-5, atol=1e-6
    )


def test_keras_masking_passes_the_token_mask_on():
    inputs = keras.Input((None, 3, 5))
    token_mask = keras.Input((None,), dtype="bool")
    layer = MultiRepresentationAttention(4)
    outputs = layer(inputs, mask=token_mask)
    pooled = keras.layers.GlobalAveragePooling1D()(outputs)
    model = keras.Model([inputs, token_mask], pooled)
    layer_out = ops.convert_to_numpy(layer(X, mask=MASK))
    expected = layer_out[1, :2].mean(0)
    np.testing.assert_allclose(
        ops.convert_to_numpy(model([X, MASK]))[1], expected, rtol=1e-5, atol=1e-6
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="units=0"):
        MultiRepresentationAttention(0)
    with pytest.raises(ValueError, match="number of representations"):
        MultiRepresentationAttention(4).build((None, None, None, 5))


@pytest.mark.every_backend
def test_harness():
    # The weights run over the R representations of each token: a padded token's whole row and
    # every missing representation get exactly zero weight.
    run_layer_test(
        MultiRepresentationAttention,
        {"units": 6},
        {"inputs": X, "representation_mask": PRESENT},
        mask=MASK,
        padded_input="inputs",
        weights_mask=lambda mask: mask[:, :, None] & PRESENT,  # (batch, T, R)
        expected_output_shape=(2, 4, 6),
        run_saved_model_check=True,
    )


def test_keras_mask_reaches_the_layer_next_to_a_representation_mask():
    # With two tensor arguments Keras fills `inputs_mask`, not `mask`: the token mask must still
    # zero the padded tokens' weights.
    inputs = keras.Input((4, 3, 5))
    token_mask = keras.Input((4,), dtype="bool")
    present = keras.Input((4, 3), dtype="bool")
    masked = AttachMask()([inputs, token_mask])  # `inputs` carrying `token_mask` as Keras mask
    layer = MultiRepresentationAttention(4)
    outputs, weights = layer(masked, representation_mask=present, return_attention_scores=True)
    model = keras.Model([inputs, token_mask, present], [outputs, weights])
    _, got = model([X, MASK, PRESENT])
    _, expected = layer(X, mask=MASK, representation_mask=PRESENT, return_attention_scores=True)
    np.testing.assert_array_equal(ops.convert_to_numpy(got)[1, 2:], 0.0)
    np.testing.assert_allclose(
        ops.convert_to_numpy(got), ops.convert_to_numpy(expected), rtol=1e-6, atol=1e-7
    )
