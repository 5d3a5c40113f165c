import keras
import numpy as np
import pytest

from keras_attn.layers import TransformerEncoderBlock
from keras_attn.testing import run_layer_test
from tests.layers.transformer import numpy_transformer as npt

RNG = np.random.default_rng(11)
B, T, D = 2, 5, 8
X = RNG.normal(size=(B, T, D)).astype("float32")
PADDING = np.array([[True] * T, [True, True, True, False, False]])


def built_block(seed=0, **kwargs):
    block = TransformerEncoderBlock(**{"num_heads": 2, "intermediate_dim": 12, **kwargs})
    block(X)
    npt.randomise(block, seed=seed)
    return block


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_matches_numpy_reference(normalize_first, activation):
    block = built_block(normalize_first=normalize_first, activation=activation)
    output, weights = block(X, inputs_mask=PADDING, return_attention_scores=True)
    expected, expected_weights = npt.encoder_block(block, X.astype("float64"), PADDING)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(output), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-6
    )


def test_post_ln_and_pre_ln_differ_with_the_same_weights():
    post = built_block(seed=1)
    pre = built_block(seed=1, normalize_first=True)
    pre.set_weights(post.get_weights())
    assert not np.allclose(
        keras.ops.convert_to_numpy(post(X)), keras.ops.convert_to_numpy(pre(X)), atol=1e-3
    )
    # post-LN ends in a LayerNorm: every position has the last norm's statistics.
    plain = built_block(seed=2)
    plain.feed_forward_norm.gamma.assign(np.ones(D, "float32"))
    plain.feed_forward_norm.beta.assign(np.zeros(D, "float32"))
    output = keras.ops.convert_to_numpy(plain(X))
    np.testing.assert_allclose(output.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(output.std(-1), 1.0, atol=1e-3)


def test_padded_positions_get_zero_weight_and_do_not_leak():
    block = built_block(seed=3)
    _, weights = block(X, inputs_mask=PADDING, return_attention_scores=True)
    assert np.all(keras.ops.convert_to_numpy(weights)[1, :, :, 3:] == 0.0)
    noisy = X.copy()
    noisy[1, 3:] = RNG.normal(scale=1e3, size=(2, D))
    clean = keras.ops.convert_to_numpy(block(X, inputs_mask=PADDING))
    changed = keras.ops.convert_to_numpy(block(noisy, inputs_mask=PADDING))
    np.testing.assert_allclose(changed[1, :3], clean[1, :3], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(changed[0], clean[0], rtol=1e-6, atol=1e-6)


def test_attention_mask_is_combined_with_padding():
    block = built_block(seed=4)
    attention_mask = RNG.random((B, T, T)) > 0.4
    attention_mask[:, :, 0] = True
    _, weights = block(
        X, inputs_mask=PADDING, attention_mask=attention_mask, return_attention_scores=True
    )
    allowed = attention_mask & PADDING[:, None, :]
    assert np.all(
        keras.ops.convert_to_numpy(weights)[np.broadcast_to(~allowed[:, None], weights.shape)]
        == 0.0
    )


def test_keras_mask_reaches_the_block_and_passes_on():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, D, mask_zero=True)(tokens)
    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=12)
    output, weights = block(embedded, return_attention_scores=True)
    pooled = keras.layers.GlobalAveragePooling1D()(output)  # averages real positions only
    model = keras.Model(tokens, [output, weights, pooled])
    output, weights, pooled = model(np.array([[1, 2, 3, 0, 0]]))
    assert np.all(keras.ops.convert_to_numpy(weights)[0, :, :, 3:] == 0.0)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(pooled)[0],
        keras.ops.convert_to_numpy(output)[0, :3].mean(0),
        rtol=1e-5,
    )


def test_keras_mask_with_an_explicit_attention_mask():
    """Two tensor arguments: Keras passes the mask as `inputs_mask` instead of `mask`."""
    tokens = keras.Input((None,), dtype="int32")
    pairs = keras.Input((None, None), dtype="bool")
    embedded = keras.layers.Embedding(10, D, mask_zero=True)(tokens)
    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=12)
    _, weights = block(embedded, attention_mask=pairs, return_attention_scores=True)
    model = keras.Model([tokens, pairs], weights)
    allowed = np.ones((1, 5, 5), bool)
    allowed[0, :, 0] = False
    weights = keras.ops.convert_to_numpy(model([np.array([[1, 2, 3, 0, 0]]), allowed]))
    assert np.all(weights[0, :, :, 3:] == 0.0) and np.all(weights[0, :, :, 0] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_heads=0"):
        TransformerEncoderBlock(num_heads=0, intermediate_dim=4)
    with pytest.raises(ValueError, match="intermediate_dim=2.5"):
        TransformerEncoderBlock(num_heads=2, intermediate_dim=2.5)
    with pytest.raises(ValueError, match="dropout=1.5"):
        TransformerEncoderBlock(num_heads=2, intermediate_dim=4, dropout=1.5)
    with pytest.raises(ValueError, match="activation='swishy'"):
        TransformerEncoderBlock(num_heads=2, intermediate_dim=4, activation="swishy")
    with pytest.raises(ValueError, match="layer_norm_epsilon=0"):
        TransformerEncoderBlock(num_heads=2, intermediate_dim=4, layer_norm_epsilon=0)
    with pytest.raises(ValueError, match="divisible by num_heads=3"):
        TransformerEncoderBlock(num_heads=3, intermediate_dim=4)(X)


def test_harness_explicit_mask_post_ln():
    run_layer_test(
        TransformerEncoderBlock,
        {"num_heads": 2, "intermediate_dim": 12, "dropout": 0.1, "attention_dropout": 0.1},
        {"inputs": X},
        mask=PADDING,
        padded_input="inputs",
        mask_kwarg="inputs_mask",
        expected_output_shape=(B, T, D),
    )


@pytest.mark.every_backend
def test_harness_keras_masking_pre_ln():
    run_layer_test(
        TransformerEncoderBlock,
        {"num_heads": 2, "intermediate_dim": 12, "normalize_first": True, "activation": "gelu"},
        {"inputs": X},
        mask=PADDING,
        padded_input="inputs",
        run_saved_model_check=False,
    )
