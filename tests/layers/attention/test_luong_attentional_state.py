import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers.attention.luong_attentional_state import LuongAttentionalState
from keras_attn.testing import run_layer_test

RNG = np.random.default_rng(7)
CONTEXT = RNG.normal(size=(2, 5, 4)).astype("float32")
HIDDEN = RNG.normal(size=(2, 5, 3)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])


def reference(context, hidden, kernel, bias=None):
    """Luong eq. 5 with the concatenation materialised: tanh([c_t; h_t] W_c + b)."""
    concatenated = np.concatenate([context, hidden], axis=-1).astype(np.float64)
    projected = concatenated @ kernel
    if bias is not None:
        projected = projected + bias
    return np.tanh(projected)


@pytest.mark.parametrize("use_bias", [False, True])
def test_matches_numpy_eq_5(use_bias):
    layer = LuongAttentionalState(6, use_bias=use_bias)
    out = ops.convert_to_numpy(layer(CONTEXT, HIDDEN))
    bias = None
    if use_bias:
        layer.bias.assign(RNG.normal(size=(6,)).astype("float32"))
        bias = ops.convert_to_numpy(layer.bias)
        out = ops.convert_to_numpy(layer(CONTEXT, HIDDEN))
    expected = reference(CONTEXT, HIDDEN, ops.convert_to_numpy(layer.kernel), bias)
    assert out.shape == (2, 5, 6)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_equals_keras_dense_on_concatenation():
    layer = LuongAttentionalState(6, activation="relu")
    ours = ops.convert_to_numpy(layer(CONTEXT, HIDDEN))
    dense = keras.layers.Dense(6, activation="relu", use_bias=False)
    concatenated = np.concatenate([CONTEXT, HIDDEN], axis=-1)
    dense.build(concatenated.shape)
    dense.set_weights([ops.convert_to_numpy(layer.kernel)])
    np.testing.assert_allclose(
        ours, ops.convert_to_numpy(dense(concatenated)), rtol=1e-5, atol=1e-6
    )


def test_mask_propagates():
    hidden = keras.Input((5, 3))
    tokens = keras.Input((5,), dtype="int32")
    context = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    state = LuongAttentionalState(6)(context, hidden)
    pooled = keras.layers.GlobalAveragePooling1D()(state)
    model = keras.Model([tokens, hidden], [state, pooled])
    ids = np.array([[1, 2, 3, 0, 0]])
    full, pooled_out = model([ids, HIDDEN[:1]])
    np.testing.assert_allclose(
        ops.convert_to_numpy(pooled_out)[0],
        ops.convert_to_numpy(full)[0, :3].mean(axis=0),
        rtol=1e-5,
        atol=1e-6,
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="units=0"):
        LuongAttentionalState(0)
    with pytest.raises(ValueError, match="units='8'"):
        LuongAttentionalState("8")
    with pytest.raises(ValueError, match="use_bias='yes'"):
        LuongAttentionalState(4, use_bias="yes")


def test_fully_masked_row_is_finite():
    mask = MASK.copy()
    mask[0] = False
    out = ops.convert_to_numpy(LuongAttentionalState(6)(CONTEXT, HIDDEN, hidden_mask=mask))
    assert np.all(np.isfinite(out))


@pytest.mark.every_backend
def test_harness():
    run_layer_test(
        LuongAttentionalState,
        {"units": 6, "use_bias": True},
        {"context": CONTEXT, "hidden": HIDDEN},
        mask=MASK,
        padded_input="context",
        weights_kwarg=None,
        expected_output_shape=(2, 5, 6),
        run_saved_model_check=True,
    )
