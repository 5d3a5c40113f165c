import tempfile

import keras
import numpy as np
import pytest

from keras_attn.layers import MultiHeadAttention, TransformerDecoder
from keras_attn.testing import run_layer_test
from keras_attn.testing.harness import MIXED_PRECISION_TOLERANCES
from tests.layers.transformer import numpy_transformer as npt
from tests.lazy_tf import tf

RNG = np.random.default_rng(31)
B, T, D, T_X = 2, 6, 8, 4
X = RNG.normal(size=(B, T, D)).astype("float32")
MEMORY = RNG.normal(size=(B, T_X, D)).astype("float32")
MEMORY_MASK = np.array([[True] * T_X, [True, True, False, False]])
UPPER = np.triu(np.ones((T, T), bool), k=1)


def built_decoder(seed=0, cross_attention=True, **kwargs):
    decoder = TransformerDecoder(
        num_layers=2, num_heads=2, intermediate_dim=12, cross_attention=cross_attention, **kwargs
    )
    decoder(X, MEMORY if cross_attention else None)
    npt.randomise(decoder, seed=seed)
    return decoder


def reference(decoder, memory=None, memory_mask=None):
    h = X.astype("float64")
    memory = None if memory is None else memory.astype("float64")
    for block in decoder.blocks:
        h, _, _ = npt.decoder_block(block, h, memory, memory_mask=memory_mask)
    return npt.layer_norm(decoder.final_norm, h) if decoder.normalize_first else h


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("cross_attention", [True, False], ids=["memory", "decoder_only"])
def test_matches_numpy_stack_of_blocks(cross_attention, normalize_first):
    decoder = built_decoder(cross_attention=cross_attention, normalize_first=normalize_first)
    memory = MEMORY if cross_attention else None
    mask = MEMORY_MASK if cross_attention else None
    output = keras.ops.convert_to_numpy(decoder(X, memory, memory_mask=mask))
    np.testing.assert_allclose(output, reference(decoder, memory, mask), rtol=1e-5, atol=1e-5)


def compiled(function):
    """`function` traced into one graph: `tf.function` under TensorFlow, `jax.jit` under JAX;
    eager under PyTorch."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(function)
    if keras.backend.backend() == "torch":
        return function
    return tf.function(function)


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("cross_attention", [True, False], ids=["memory", "decoder_only"])
def test_cached_token_by_token_equals_full_causal_pass(cross_attention, normalize_first):
    decoder = built_decoder(
        seed=1, cross_attention=cross_attention, normalize_first=normalize_first
    )
    memory = MEMORY if cross_attention else None
    mask = MEMORY_MASK if cross_attention else None
    full, full_scores = decoder(X, memory, memory_mask=mask, return_attention_scores=True)

    @compiled
    def step(token, cache, index):
        return decoder(
            token, cache=cache, cache_index=index, memory_mask=mask, return_attention_scores=True
        )

    cache = decoder.initial_cache(B, T, memory)
    assert isinstance(cache, tuple) and len(cache) == 2
    outputs, self_weights = [], []
    for t in range(T):
        output, scores, cache = step(X[:, t : t + 1], cache, keras.ops.convert_to_tensor(t))
        outputs.append(keras.ops.convert_to_numpy(output))
        self_weights.append(keras.ops.convert_to_numpy(scores["self_attention"]))
    np.testing.assert_allclose(
        np.concatenate(outputs, 1), keras.ops.convert_to_numpy(full), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        np.concatenate(self_weights, 3),
        keras.ops.convert_to_numpy(full_scores["self_attention"]),
        atol=1e-6,
    )


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_cached_decoding_under_mixed_precision(policy):
    decoder = TransformerDecoder(2, 2, 12, dtype=policy)
    full = decoder(X, MEMORY)
    cache = decoder.initial_cache(B, T, MEMORY)
    compute = keras.backend.standardize_dtype(decoder.compute_dtype)
    assert all(
        keras.backend.standardize_dtype(x.dtype) == compute for x in keras.tree.flatten(cache)
    )
    outputs = []
    for t in range(T):
        output, cache = decoder(X[:, t : t + 1], cache=cache, cache_index=t)
        assert keras.backend.standardize_dtype(output.dtype) == compute
        outputs.append(keras.ops.convert_to_numpy(keras.ops.cast(output, "float32")))
    tolerance = MIXED_PRECISION_TOLERANCES[policy]
    expected = keras.ops.convert_to_numpy(keras.ops.cast(full, "float32"))
    np.testing.assert_allclose(np.concatenate(outputs, 1), expected, atol=tolerance, rtol=0)


@pytest.mark.tensorflow_only
@pytest.mark.slow
def test_cached_step_compiles_with_xla():
    decoder = built_decoder(seed=6)
    full = keras.ops.convert_to_numpy(decoder(X, MEMORY, memory_mask=MEMORY_MASK))

    @tf.function(jit_compile=True)
    def step(token, cache, index):
        return decoder(token, cache=cache, cache_index=index, memory_mask=MEMORY_MASK)

    cache = decoder.initial_cache(B, T, MEMORY)
    outputs = []
    for t in range(T):
        output, cache = step(X[:, t : t + 1], cache, tf.constant(t))
        outputs.append(keras.ops.convert_to_numpy(output))
    np.testing.assert_allclose(np.concatenate(outputs, 1), full, rtol=1e-5, atol=1e-5)


def _graph_decoder(decoder):
    """A `tf.Module` running cached decoding inside one tf.while_loop, the way an exported
    decoder runs (defined here: the module imports no TensorFlow)."""

    class _GraphDecoder(tf.Module):
        """Cached decoding inside one tf.while_loop, the way an exported decoder runs."""

        def __init__(self, decoder):
            super().__init__()
            self.decoder = decoder

        @tf.function(
            input_signature=[tf.TensorSpec([None, None, D]), tf.TensorSpec([None, None, D])]
        )
        def run(self, inputs, memory):
            length = tf.shape(inputs)[1]
            cache = self.decoder.initial_cache(tf.shape(inputs)[0], length, memory)
            outputs = tf.TensorArray(tf.float32, size=length)

            def body(t, cache, outputs):
                output, cache = self.decoder(inputs[:, t : t + 1], cache=cache, cache_index=t)
                return t + 1, cache, outputs.write(t, output[:, 0])

            _, _, outputs = tf.while_loop(
                lambda t, *_: t < length, body, (tf.constant(0), cache, outputs)
            )
            return tf.transpose(outputs.stack(), [1, 0, 2])  # (T, batch, d) -> (batch, T, d)

    return _GraphDecoder(decoder)


@pytest.mark.tensorflow_only
@pytest.mark.slow
def test_cached_decoding_in_a_while_loop_survives_saved_model_export():
    decoder = built_decoder(seed=7)
    full = keras.ops.convert_to_numpy(decoder(X, MEMORY))
    module = _graph_decoder(decoder)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(module.run(X, MEMORY)), full, rtol=1e-5, atol=1e-5
    )
    with tempfile.TemporaryDirectory() as directory:
        tf.saved_model.save(module, directory)
        reloaded = tf.saved_model.load(directory)
        got = keras.ops.convert_to_numpy(reloaded.run(X, MEMORY))
    np.testing.assert_allclose(got, full, rtol=1e-5, atol=1e-5)


def test_prompt_prefill_then_steps():
    decoder = built_decoder(seed=2, cross_attention=False, normalize_first=True)
    full = keras.ops.convert_to_numpy(decoder(X))
    cache = decoder.initial_cache(B, T)
    prompt, cache = decoder(X[:, :4], cache=cache, cache_index=0)
    rest = []
    for t in range(4, T):
        output, cache = decoder(X[:, t : t + 1], cache=cache, cache_index=t)
        rest.append(keras.ops.convert_to_numpy(output))
    got = np.concatenate([keras.ops.convert_to_numpy(prompt), *rest], 1)
    np.testing.assert_allclose(got, full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cross_attention", [True, False], ids=["memory", "decoder_only"])
def test_cached_multi_token_calls_with_keras_masks_equal_the_full_pass(cross_attention):
    """Keras masks cover the new tokens only; the keys of every block cover cache + new tokens."""
    decoder = built_decoder(seed=8, cross_attention=cross_attention)
    memory = MEMORY if cross_attention else None
    memory_mask = MEMORY_MASK if cross_attention else None
    holes = np.array([[True] * T, [False, True, True, False, True, True]])  # row 1: slots 0, 3

    def masked(start, stop):
        x = np.where(holes[:, start:stop, None], X[:, start:stop], 0.0)
        return keras.layers.Masking(mask_value=0.0)(x)  # carries holes[:, start:stop]

    full = keras.ops.convert_to_numpy(decoder(masked(0, T), memory, memory_mask=memory_mask))
    cache = decoder.initial_cache(B, T, memory)
    first, cache = decoder(masked(0, 2), cache=cache, cache_index=0, memory_mask=memory_mask)
    # Slot 0 of row 1 was padding: later calls hide it with attention_mask (batch, T_new, S).
    seen = np.broadcast_to(holes[:, None, :], (B, 4, T))
    second, cache = decoder(
        masked(2, 6), cache=cache, cache_index=2, memory_mask=memory_mask, attention_mask=seen
    )
    got = np.concatenate(
        [keras.ops.convert_to_numpy(first), keras.ops.convert_to_numpy(second)], axis=1
    )
    np.testing.assert_allclose(got, full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cross_attention", [True, False], ids=["memory", "decoder_only"])
def test_no_position_attends_to_the_future_in_any_layer(cross_attention):
    decoder = built_decoder(seed=3, cross_attention=cross_attention)
    memory = MEMORY if cross_attention else None
    output, scores = decoder(X, memory, return_attention_scores=True)
    weights = keras.ops.convert_to_numpy(scores["self_attention"])
    assert weights.shape == (B, 2, 2, T, T)
    assert np.all(weights[..., UPPER] == 0.0)
    if cross_attention:
        assert scores["cross_attention"].shape == (B, 2, 2, T, T_X)
    for t in (1, 3, 5):
        perturbed = X.copy()
        perturbed[:, t:] = RNG.normal(scale=10.0, size=perturbed[:, t:].shape)
        changed = keras.ops.convert_to_numpy(decoder(perturbed, memory))
        # Equal up to round-off: PyTorch's kernels need not sum a row the same way when the
        # other rows change (TensorFlow and JAX give equal bits); the perturbation is O(10).
        np.testing.assert_allclose(
            changed[:, :t], keras.ops.convert_to_numpy(output)[:, :t], rtol=1e-5, atol=1e-6
        )


def test_padded_memory_gets_zero_weight_in_every_layer():
    decoder = built_decoder(seed=4)
    _, scores = decoder(X, MEMORY, memory_mask=MEMORY_MASK, return_attention_scores=True)
    assert np.all(keras.ops.convert_to_numpy(scores["cross_attention"])[1, ..., 2:] == 0.0)


def test_keras_masks_reach_every_block_in_a_functional_model():
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    source_embedding = keras.layers.Embedding(10, D, mask_zero=True)
    target_embedding = keras.layers.Embedding(10, D, mask_zero=True)
    decoder = TransformerDecoder(2, 2, 12)
    model = keras.Model(
        [source, target], decoder(target_embedding(target), source_embedding(source))
    )
    source_ids, target_ids = np.array([[1, 2, 0, 0]]), np.array([[3, 4, 5]])
    got = keras.ops.convert_to_numpy(model([source_ids, target_ids]))
    # the same tensors without Keras masks, with and without explicit masks
    memory = keras.ops.convert_to_tensor(keras.ops.convert_to_numpy(source_embedding(source_ids)))
    x = keras.ops.convert_to_tensor(keras.ops.convert_to_numpy(target_embedding(target_ids)))
    explicit = keras.ops.convert_to_numpy(decoder(x, memory, memory_mask=source_ids != 0))
    unmasked = keras.ops.convert_to_numpy(decoder(x, memory))
    np.testing.assert_allclose(got, explicit, rtol=1e-6, atol=1e-6)
    assert not np.allclose(got, unmasked, atol=1e-4)


def test_bad_calls():
    decoder = built_decoder()
    cache = decoder.initial_cache(B, T, MEMORY)
    with pytest.raises(ValueError, match="one entry per layer"):
        decoder(X[:, :1], cache=cache[:1], cache_index=0)
    with pytest.raises(ValueError, match="pass `memory`"):
        decoder(X)
    with pytest.raises(ValueError, match="Build the decoder"):
        TransformerDecoder(1, 2, 4).initial_cache(B, T, MEMORY)


def test_harness_padded_memory():
    run_layer_test(
        TransformerDecoder,
        {"num_layers": 2, "num_heads": 2, "intermediate_dim": 12, "dropout": 0.1},
        {"inputs": X, "memory": MEMORY},
        mask=MEMORY_MASK,
        padded_input="memory",
        weights_kwarg=None,
        expected_output_shape=(B, T, D),
        run_saved_model_check=False,
    )


@pytest.mark.every_backend
def test_harness_decoder_only():
    run_layer_test(
        TransformerDecoder,
        {
            "num_layers": 2,
            "num_heads": 2,
            "intermediate_dim": 12,
            "cross_attention": False,
            "normalize_first": True,
            "activation": "gelu",
        },
        {"inputs": X},
        mask=np.array([[True] * T, [True, True, True, False, False, False]]),
        padded_input="inputs",
        mask_kwarg="inputs_mask",
        weights_kwarg=None,
        expected_output_shape=(B, T, D),
    )


def force_fused_attention(decoder, flag: bool) -> None:
    """Set `use_fused_attention` of every attention layer of `decoder`'s blocks."""
    for block in decoder.blocks:
        for attention in (block.self_attention, block.cross_attention_layer):
            assert isinstance(attention, MultiHeadAttention)
            attention.use_fused_attention = flag


def count_fused_calls(monkeypatch) -> list:
    calls = []
    fused_op = keras.ops.dot_product_attention
    monkeypatch.setattr(
        keras.ops, "dot_product_attention", lambda *a, **k: calls.append(1) or fused_op(*a, **k)
    )
    return calls


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_fused_attention_equals_explicit_in_full_and_cached_passes(policy, monkeypatch):
    decoder = built_decoder(seed=3, dtype=policy)
    tolerance = {"float32": 1e-5, **MIXED_PRECISION_TOLERANCES}[policy]

    def numpy(x):
        return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))

    force_fused_attention(decoder, False)
    expected = numpy(decoder(X, MEMORY, memory_mask=MEMORY_MASK))
    calls = count_fused_calls(monkeypatch)
    force_fused_attention(decoder, True)
    full = numpy(decoder(X, MEMORY, memory_mask=MEMORY_MASK))
    assert len(calls) == 4  # self- and cross-attention of both blocks
    np.testing.assert_allclose(full, expected, atol=tolerance, rtol=tolerance)
    # Returning the weights takes the explicit path in every block.
    with_scores, _ = decoder(X, MEMORY, memory_mask=MEMORY_MASK, return_attention_scores=True)
    assert len(calls) == 4
    np.testing.assert_allclose(numpy(with_scores), expected, atol=tolerance, rtol=tolerance)
    # Cached steps: the causal mask offset by the cache index, the projected memory in the cache.
    cache = decoder.initial_cache(B, T, MEMORY)
    outputs = []
    for t in range(T):
        output, cache = decoder(
            X[:, t : t + 1], cache=cache, cache_index=t, memory_mask=MEMORY_MASK
        )
        outputs.append(numpy(output))
    assert len(calls) == 4 + 4 * T
    np.testing.assert_allclose(np.concatenate(outputs, 1), expected, atol=tolerance, rtol=tolerance)
