import keras
import numpy as np
import pytest

from keras_attn.layers import TransformerDecoderBlock
from keras_attn.testing import run_layer_test
from tests.layers.transformer import numpy_transformer as npt
from tests.lazy_tf import tf

RNG = np.random.default_rng(5)
B, T, D, T_X, D_X = 2, 5, 8, 6, 12
X = RNG.normal(size=(B, T, D)).astype("float32")
MEMORY = RNG.normal(size=(B, T_X, D_X)).astype("float32")
MEMORY_MASK = np.array([[True] * T_X, [True, True, True, True, False, False]])
PADDING = np.array([[True] * T, [True, True, True, False, False]])
UPPER = np.triu(np.ones((T, T), bool), k=1)


def built_block(seed=0, cross_attention=True, **kwargs):
    block = TransformerDecoderBlock(
        num_heads=2, intermediate_dim=12, cross_attention=cross_attention, **kwargs
    )
    block(X, MEMORY if cross_attention else None)
    npt.randomise(block, seed=seed)
    return block


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
def test_matches_numpy_reference_with_memory(normalize_first):
    block = built_block(normalize_first=normalize_first)
    output, scores = block(
        X, MEMORY, inputs_mask=PADDING, memory_mask=MEMORY_MASK, return_attention_scores=True
    )
    expected, self_weights, cross_weights = npt.decoder_block(
        block, X.astype("float64"), MEMORY.astype("float64"), PADDING, MEMORY_MASK
    )
    np.testing.assert_allclose(keras.ops.convert_to_numpy(output), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(scores["self_attention"]), self_weights, atol=1e-6
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(scores["cross_attention"]), cross_weights, atol=1e-6
    )


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
def test_matches_numpy_reference_decoder_only(normalize_first):
    block = built_block(cross_attention=False, normalize_first=normalize_first, activation="gelu")
    output, scores = block(X, return_attention_scores=True)
    assert set(scores) == {"self_attention"}
    expected, self_weights, _ = npt.decoder_block(block, X.astype("float64"))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(output), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(scores["self_attention"]), self_weights, atol=1e-6
    )


def test_residual_after_cross_attention_is_norm_1_not_x():
    """The cross-attention residual adds norm_1 (Vaswani et al.), not the block input X."""
    block = built_block(seed=7)
    output = keras.ops.convert_to_numpy(block(X, MEMORY))
    expected, _, _ = npt.decoder_block(block, X.astype("float64"), MEMORY.astype("float64"))
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-5)
    h = X.astype("float64")
    causal = np.broadcast_to(np.tril(np.ones((T, T), bool)), (B, T, T))
    mha_1, _ = npt.multi_head_attention(block.self_attention, h, h, causal)
    norm_1 = npt.layer_norm(block.self_attention_norm, h + mha_1)
    mha_2, _ = npt.multi_head_attention(block.cross_attention_layer, norm_1, MEMORY)
    typo = npt.layer_norm(block.cross_attention_norm, mha_2 + h)  # the wrong residual
    right = npt.layer_norm(block.cross_attention_norm, mha_2 + norm_1)
    ffn = block.feed_forward
    typo_out = npt.layer_norm(block.feed_forward_norm, typo + npt.feed_forward(ffn, typo))
    right_out = npt.layer_norm(block.feed_forward_norm, right + npt.feed_forward(ffn, right))
    np.testing.assert_allclose(output, right_out, rtol=1e-5, atol=1e-5)
    assert not np.allclose(output, typo_out, atol=1e-2)


@pytest.mark.parametrize("cross_attention", [True, False], ids=["memory", "decoder_only"])
def test_no_position_attends_to_the_future(cross_attention):
    block = built_block(seed=1, cross_attention=cross_attention)
    memory = MEMORY if cross_attention else None
    output, scores = block(X, memory, return_attention_scores=True)
    weights = keras.ops.convert_to_numpy(scores["self_attention"])
    assert np.all(weights[:, :, UPPER] == 0.0)
    assert np.all(weights[:, :, ~UPPER] > 0.0)
    # Perturbing position t changes nothing before t.
    for t in range(1, T):
        perturbed = X.copy()
        perturbed[:, t:] += RNG.normal(scale=10.0, size=perturbed[:, t:].shape)
        changed = keras.ops.convert_to_numpy(block(perturbed, memory))
        # Equal up to round-off: PyTorch's kernels need not sum a row the same way when the
        # other rows change (TensorFlow and JAX give equal bits); the perturbation is O(10).
        np.testing.assert_allclose(
            changed[:, :t], keras.ops.convert_to_numpy(output)[:, :t], rtol=1e-5, atol=1e-6
        )
        assert not np.allclose(changed[:, t], keras.ops.convert_to_numpy(output)[:, t])


def test_padded_memory_and_padded_decoder_positions_get_zero_weight():
    block = built_block(seed=2)
    _, scores = block(
        X, MEMORY, inputs_mask=PADDING, memory_mask=MEMORY_MASK, return_attention_scores=True
    )
    assert np.all(keras.ops.convert_to_numpy(scores["cross_attention"])[1, :, :, 4:] == 0.0)
    assert np.all(keras.ops.convert_to_numpy(scores["self_attention"])[1, :, :, 3:] == 0.0)


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("cross_attention", [True, False], ids=["memory", "decoder_only"])
def test_cached_token_by_token_equals_full_causal_pass(cross_attention, normalize_first):
    block = built_block(seed=3, cross_attention=cross_attention, normalize_first=normalize_first)
    memory = MEMORY if cross_attention else None
    mask = MEMORY_MASK if cross_attention else None
    full, full_scores = block(X, memory, memory_mask=mask, return_attention_scores=True)

    cache = block.initial_cache(B, T, memory)
    steps, self_weights, cross_weights = [], [], []
    for t in range(T):
        output, scores, cache = block(
            X[:, t : t + 1],
            cache=cache,
            cache_index=t,
            memory_mask=mask,
            return_attention_scores=True,
        )
        steps.append(keras.ops.convert_to_numpy(output))
        self_weights.append(keras.ops.convert_to_numpy(scores["self_attention"]))
        if cross_attention:
            cross_weights.append(keras.ops.convert_to_numpy(scores["cross_attention"]))
    np.testing.assert_allclose(
        np.concatenate(steps, 1), keras.ops.convert_to_numpy(full), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        np.concatenate(self_weights, 2),
        keras.ops.convert_to_numpy(full_scores["self_attention"]),
        atol=1e-6,
    )
    if cross_attention:
        np.testing.assert_allclose(
            np.concatenate(cross_weights, 2),
            keras.ops.convert_to_numpy(full_scores["cross_attention"]),
            atol=1e-6,
        )


# Row 1 is padded at slot 1 (inside the prompt) and slot 4 (a later step).
HOLES = np.array([[True] * T, [True, False, True, True, False]])


def keras_masked(x, mask):
    """`x` as a tensor carrying `mask` as its Keras mask (what an Embedding(mask_zero) hands on)."""
    return keras.layers.Masking(mask_value=0.0)(np.where(mask[..., None], x, 0.0))


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("cross_attention", [True, False], ids=["memory", "decoder_only"])
def test_cached_multi_token_call_with_a_keras_mask_equals_the_full_pass(
    cross_attention, normalize_first
):
    """The Keras mask covers the new tokens only, the keys cover cache + new tokens."""
    block = built_block(seed=8, cross_attention=cross_attention, normalize_first=normalize_first)
    memory = MEMORY if cross_attention else None
    memory_mask = MEMORY_MASK if cross_attention else None
    inputs = keras_masked(X, HOLES)
    full, full_scores = block(inputs, memory, memory_mask=memory_mask, return_attention_scores=True)
    cache = block.initial_cache(B, T, memory)
    prompt, prompt_scores, cache = block(
        keras_masked(X[:, :3], HOLES[:, :3]),
        cache=cache,
        cache_index=0,
        memory_mask=memory_mask,
        return_attention_scores=True,
    )
    # Later calls: the padded prompt slot stays hidden through attention_mask (batch, T_new, S).
    rest, rest_scores, cache = block(
        keras_masked(X[:, 3:], HOLES[:, 3:]),
        cache=cache,
        cache_index=3,
        memory_mask=memory_mask,
        attention_mask=np.broadcast_to(HOLES[:, None, :], (B, 2, T)),
        return_attention_scores=True,
    )
    got = np.concatenate(
        [keras.ops.convert_to_numpy(prompt), keras.ops.convert_to_numpy(rest)], axis=1
    )
    np.testing.assert_allclose(got, keras.ops.convert_to_numpy(full), rtol=1e-5, atol=1e-5)
    weights = np.concatenate(
        [
            keras.ops.convert_to_numpy(prompt_scores["self_attention"]),
            keras.ops.convert_to_numpy(rest_scores["self_attention"]),
        ],
        axis=2,
    )
    np.testing.assert_allclose(
        weights, keras.ops.convert_to_numpy(full_scores["self_attention"]), atol=1e-6
    )
    assert np.all(weights[1, :, :, 1] == 0.0) and np.all(weights[1, :, :, 4] == 0.0)


def test_cache_structure_and_cross_cache_is_the_projected_memory():
    block = built_block(seed=4)
    cache = block.initial_cache(B, 7, MEMORY)
    assert sorted(cache) == ["cross_key", "cross_value", "self_key", "self_value"]
    assert tuple(cache["self_key"].shape) == (B, 2, 7, 4)
    assert np.all(keras.ops.convert_to_numpy(cache["self_value"]) == 0.0)
    attention = block.cross_attention_layer
    keys = np.einsum("btd,dhe->bhte", MEMORY, keras.ops.convert_to_numpy(attention.key_kernel))
    keys += keras.ops.convert_to_numpy(attention.key_bias)[:, None]
    values = np.einsum("btd,dhe->bhte", MEMORY, keras.ops.convert_to_numpy(attention.value_kernel))
    values += keras.ops.convert_to_numpy(attention.value_bias)[:, None]
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(cache["cross_key"]), keys, rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(cache["cross_value"]), values, rtol=1e-5, atol=1e-5
    )
    _, new_cache = block(X[:, :1], cache=cache, cache_index=0)
    assert sorted(new_cache) == sorted(cache)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(new_cache["cross_key"]),
        keras.ops.convert_to_numpy(cache["cross_key"]),
    )
    assert np.any(keras.ops.convert_to_numpy(new_cache["self_key"])[:, :, 0] != 0)
    assert np.all(keras.ops.convert_to_numpy(new_cache["self_key"])[:, :, 1:] == 0)


@pytest.mark.tensorflow_only
def test_prefill_then_steps_in_a_tf_function():
    block = built_block(seed=5)
    full = keras.ops.convert_to_numpy(block(X, MEMORY, memory_mask=MEMORY_MASK))

    @tf.function
    def step(tokens, cache, index):
        return block(tokens, cache=cache, cache_index=index, memory_mask=MEMORY_MASK)

    cache = block.initial_cache(B, T, MEMORY)
    prompt, cache = step(X[:, :3], cache, tf.constant(0))
    fourth, cache = step(X[:, 3:4], cache, tf.constant(3))
    fifth, cache = step(X[:, 4:5], cache, tf.constant(4))
    got = np.concatenate(
        [
            keras.ops.convert_to_numpy(prompt),
            keras.ops.convert_to_numpy(fourth),
            keras.ops.convert_to_numpy(fifth),
        ],
        axis=1,
    )
    np.testing.assert_allclose(got, full, rtol=1e-5, atol=1e-5)


def test_keras_masks_of_both_inputs_are_used():
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    memory = keras.layers.Embedding(10, D_X, mask_zero=True)(source)
    x = keras.layers.Embedding(10, D, mask_zero=True)(target)
    output, scores = TransformerDecoderBlock(2, 12)(x, memory, return_attention_scores=True)
    pooled = keras.layers.GlobalAveragePooling1D()(output)
    model = keras.Model([source, target], [output, scores["cross_attention"], pooled])
    output, cross, pooled = model([np.array([[1, 2, 3, 0]]), np.array([[4, 5, 0]])])
    assert np.all(keras.ops.convert_to_numpy(cross)[0, :, :, 3:] == 0.0)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(pooled)[0],
        keras.ops.convert_to_numpy(output)[0, :2].mean(0),
        rtol=1e-5,
    )


def test_bad_calls_and_arguments():
    with pytest.raises(ValueError, match="num_heads=-1"):
        TransformerDecoderBlock(num_heads=-1, intermediate_dim=4)
    with pytest.raises(ValueError, match="attention_dropout=1"):
        TransformerDecoderBlock(num_heads=2, intermediate_dim=4, attention_dropout=1)
    gpt = built_block(cross_attention=False)
    with pytest.raises(ValueError, match="cross_attention=False"):
        gpt(X, MEMORY)
    block = built_block()
    with pytest.raises(ValueError, match="pass `memory`"):
        block(X)
    cache = block.initial_cache(B, T, MEMORY)
    with pytest.raises(ValueError, match="cache_index"):
        block(X[:, :1], cache=cache)
    with pytest.raises(ValueError, match="memory=None"):
        block(X[:, :1], MEMORY, cache=cache, cache_index=0)
    with pytest.raises(ValueError, match="needs `memory`"):
        block.initial_cache(B, T)


def test_harness_padded_memory():
    run_layer_test(
        TransformerDecoderBlock,
        {"num_heads": 2, "intermediate_dim": 12, "dropout": 0.1, "attention_dropout": 0.1},
        {"inputs": X, "memory": MEMORY},
        mask=MEMORY_MASK,
        padded_input="memory",
        mask_kwarg="memory_mask",
        weights_kwarg=None,
        expected_output_shape=(B, T, D),
    )


@pytest.mark.every_backend
def test_harness_decoder_only_keras_masking_pre_ln():
    run_layer_test(
        TransformerDecoderBlock,
        {
            "num_heads": 2,
            "intermediate_dim": 12,
            "cross_attention": False,
            "normalize_first": True,
            "activation": "gelu",
        },
        {"inputs": X},
        mask=PADDING,
        padded_input="inputs",
        weights_kwarg=None,
        run_saved_model_check=False,
    )
