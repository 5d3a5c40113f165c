import keras
import numpy as np
import pytest

from keras_attn.layers import TransformerEncoder
from keras_attn.testing import run_layer_test
from tests.layers.transformer import numpy_transformer as npt

RNG = np.random.default_rng(21)
B, T, D = 2, 5, 8
X = RNG.normal(size=(B, T, D)).astype("float32")
PADDING = np.array([[True] * T, [True, True, False, False, False]])


def built_encoder(seed=0, **kwargs):
    encoder = TransformerEncoder(num_layers=3, num_heads=2, intermediate_dim=12, **kwargs)
    encoder(X)
    npt.randomise(encoder, seed=seed)
    return encoder


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
def test_matches_numpy_stack_of_blocks(normalize_first):
    encoder = built_encoder(normalize_first=normalize_first)
    output, weights = encoder(X, inputs_mask=PADDING, return_attention_scores=True)
    assert len(encoder.blocks) == 3 and (encoder.final_norm is not None) == normalize_first
    h, expected_weights = X.astype("float64"), []
    for block in encoder.blocks:
        h, block_weights = npt.encoder_block(block, h, PADDING)
        expected_weights.append(block_weights)
    if normalize_first:
        h = npt.layer_norm(encoder.final_norm, h)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(output), h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(weights), np.stack(expected_weights, 1), atol=1e-6
    )
    assert weights.shape == (B, 3, 2, T, T)
    assert np.all(keras.ops.convert_to_numpy(weights)[1, ..., 2:] == 0.0)


def test_blocks_do_not_share_weights():
    encoder = TransformerEncoder(num_layers=2, num_heads=2, intermediate_dim=12)
    encoder(X)
    first, second = (
        keras.ops.convert_to_numpy(block.self_attention.query_kernel) for block in encoder.blocks
    )
    assert not np.allclose(first, second)


def test_keras_mask_passes_through_the_stack():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, D, mask_zero=True)(tokens)
    output = TransformerEncoder(2, 2, 12)(embedded)
    pooled = keras.layers.GlobalAveragePooling1D()(output)
    model = keras.Model(tokens, [output, pooled])
    output, pooled = model(np.array([[3, 4, 5, 0, 0]]))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(pooled)[0],
        keras.ops.convert_to_numpy(output)[0, :3].mean(0),
        rtol=1e-5,
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_layers=0"):
        TransformerEncoder(num_layers=0, num_heads=2, intermediate_dim=4)
    with pytest.raises(ValueError, match="layer_norm_epsilon=-1"):
        TransformerEncoder(1, 2, 4, layer_norm_epsilon=-1)


@pytest.mark.every_backend
def test_harness():
    run_layer_test(
        TransformerEncoder,
        {"num_layers": 2, "num_heads": 2, "intermediate_dim": 12, "dropout": 0.1},
        {"inputs": X},
        mask=PADDING,
        padded_input="inputs",
        mask_kwarg="inputs_mask",
        expected_output_shape=(B, T, D),
    )


def test_fused_attention_equals_explicit_and_is_skipped_for_weights(monkeypatch):
    encoder = built_encoder(seed=4)
    attentions = [block.self_attention for block in encoder.blocks]
    for attention in attentions:
        attention.use_fused_attention = False
    expected = keras.ops.convert_to_numpy(encoder(X, inputs_mask=PADDING))
    calls = []
    fused_op = keras.ops.dot_product_attention
    monkeypatch.setattr(
        keras.ops, "dot_product_attention", lambda *a, **k: calls.append(1) or fused_op(*a, **k)
    )
    for attention in attentions:
        attention.use_fused_attention = True
    got = keras.ops.convert_to_numpy(encoder(X, inputs_mask=PADDING))
    assert len(calls) == 3  # one per block
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)
    with_weights, weights = encoder(X, inputs_mask=PADDING, return_attention_scores=True)
    assert len(calls) == 3 and tuple(weights.shape) == (B, 3, 2, T, T)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(with_weights), expected, atol=1e-5)
