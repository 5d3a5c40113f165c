"""Layers whose output keeps their first input's positions pass its Keras mask on."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn import layers

LAYERS = [
    lambda: layers.Attention(),
    lambda: layers.AreaAttention(max_area_width=2),
    lambda: layers.HardAttention(),
    lambda: layers.KernelAttention(num_heads=2, key_dim=4),
    lambda: layers.LocalAttention(window=1),
    lambda: layers.MultiHeadAttention(num_heads=2, key_dim=4),
    lambda: layers.CompositionalDeAttention(),
    lambda: layers.LuongAttentionalState(8),
    lambda: layers.BahdanauDecoder(8),
    lambda: layers.CoAttention(),
]


@pytest.mark.parametrize("make", LAYERS, ids=lambda make: type(make()).__name__)
def test_padded_queries_stay_masked_downstream(make):
    tokens = keras.Input((4,), dtype="int32")
    embedded = keras.layers.Embedding(10, 8, mask_zero=True)(tokens)
    output = make()(embedded, embedded)
    if isinstance(output, (tuple, list)):  # CoAttention: (context for a, context for b)
        output = output[0]
    pooled = keras.layers.GlobalAveragePooling1D()(output)
    model = keras.Model(tokens, [output, pooled])
    sequence, mean = model(np.array([[1, 2, 0, 0]]))
    np.testing.assert_allclose(
        ops.convert_to_numpy(mean)[0],
        ops.convert_to_numpy(sequence)[0, :2].mean(0),
        rtol=1e-5,
        atol=1e-6,
    )


def test_mixin_returns_the_first_inputs_mask():
    from keras_attn.layers.mask_passthrough import FirstInputMaskPassthrough

    mask = np.array([[True, False]])
    assert FirstInputMaskPassthrough().compute_mask(np.zeros((1, 2, 3)), mask) is mask
