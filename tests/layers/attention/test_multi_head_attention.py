import keras
import numpy as np
import pytest

from keras_attn.layers.attention.multi_head_attention import MultiHeadAttention
from keras_attn.testing import run_layer_test
from keras_attn.testing.mixed_precision_check import MIXED_PRECISION_TOLERANCES
from tests import numpy_reference as ref
from tests.lazy_tf import tf

RNG = np.random.default_rng(7)
B, T_Q, T_K, D = 2, 3, 5, 8
X = RNG.normal(size=(B, T_Q, D)).astype("float32")
V = RNG.normal(size=(B, T_K, 6)).astype("float32")
K = RNG.normal(size=(B, T_K, 7)).astype("float32")
VALUE_MASK = np.array([[True] * T_K, [True, True, True, False, False]])


def copy_keras_weights(keras_layer, layer):
    """Copy `keras.layers.MultiHeadAttention`'s EinsumDense kernels and biases into `layer`."""
    sublayers = {
        "query": keras_layer._query_dense,
        "key": keras_layer._key_dense,
        "value": keras_layer._value_dense,
        "output": keras_layer._output_dense,
    }
    for name, dense in sublayers.items():
        getattr(layer, f"{name}_kernel").assign(dense.kernel)
        getattr(layer, f"{name}_bias").assign(dense.bias)


def randomise(layer, seed=0):
    """Give every weight (biases included) non-trivial values."""
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.normal(scale=0.5, size=weight.shape).astype("float32"))


def reference(layer, query, value, key=None, mask=None):
    """Multi-head attention (Vaswani et al., 2017) in NumPy (float64), the layer's weights."""
    key = value if key is None else key
    w = {
        name: keras.ops.convert_to_numpy(getattr(layer, name)).astype("float64")
        for name in _WEIGHT_NAMES
    }
    q = np.einsum("btd,dhe->bhte", query, w["query_kernel"]) + w["query_bias"][:, None]
    k = np.einsum("btd,dhe->bhte", key, w["key_kernel"]) + w["key_bias"][:, None]
    v = np.einsum("btd,dhe->bhte", value, w["value_kernel"]) + w["value_bias"][:, None]
    scores = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(layer.key_dim)
    weights = ref.softmax(scores, None if mask is None else mask[:, None])
    heads = np.einsum("bhqk,bhke->bqhe", weights, v)
    output = np.einsum("bqhe,heo->bqo", heads, w["output_kernel"]) + w["output_bias"]
    return output, weights


_WEIGHT_NAMES = [
    f"{part}_{kind}" for part in ("query", "key", "value", "output") for kind in ("kernel", "bias")
]


def test_matches_numpy_reference_with_masks():
    layer = MultiHeadAttention(num_heads=2, key_dim=3, value_dim=4, output_shape=5)
    layer(X, V, key=K)
    randomise(layer)
    attention_mask = RNG.random((B, T_Q, T_K)) > 0.3
    attention_mask[:, :, 0] = True
    output, weights = layer(
        X,
        V,
        key=K,
        value_mask=VALUE_MASK,
        attention_mask=attention_mask,
        return_attention_scores=True,
    )
    mask = VALUE_MASK[:, None, :] & attention_mask
    expected_output, expected_weights = reference(layer, X, V, K, mask)
    assert output.shape == (B, T_Q, 5) and weights.shape == (B, 2, T_Q, T_K)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(output), expected_output, rtol=1e-5, atol=1e-5
    )
    assert np.all(keras.ops.convert_to_numpy(weights)[1, :, :, 3:] == 0.0)


@pytest.mark.parametrize("mode", ["self", "cross_kv", "cross_separate_key"])
def test_equals_keras_multi_head_attention(mode):
    query = X
    value = {"self": X, "cross_kv": V, "cross_separate_key": V}[mode]
    key = K if mode == "cross_separate_key" else None
    value_mask = VALUE_MASK if mode != "self" else VALUE_MASK[:, :T_Q]
    t_k = value.shape[1]
    attention_mask = RNG.random((B, T_Q, t_k)) > 0.4
    attention_mask[:, :, 0] = True

    theirs_layer = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3)
    # Built through its explicit path: Keras' fused path under JAX (jax.nn.dot_product_attention)
    # rejects value_dim != key_dim.
    theirs_layer(query, value, key=key, return_attention_scores=True)
    randomise(theirs_layer, seed=1)
    ours_layer = MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3)
    ours_layer(query, value, key=key)
    copy_keras_weights(theirs_layer, ours_layer)

    kwargs = dict(value_mask=value_mask, attention_mask=attention_mask)
    ours, our_weights = ours_layer(query, value, key=key, return_attention_scores=True, **kwargs)
    theirs, their_weights = theirs_layer(
        query, value, key=key, return_attention_scores=True, **kwargs
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(theirs), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(our_weights),
        keras.ops.convert_to_numpy(their_weights),
        rtol=1e-5,
        atol=1e-6,
    )


def test_causal_mask_equals_keras():
    theirs_layer = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    theirs_layer(X, X)
    randomise(theirs_layer, seed=2)
    ours_layer = MultiHeadAttention(num_heads=2, key_dim=4)
    ours_layer(X, X)
    copy_keras_weights(theirs_layer, ours_layer)
    ours, weights = ours_layer(X, X, use_causal_mask=True, return_attention_scores=True)
    theirs = theirs_layer(X, X, use_causal_mask=True)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(theirs), rtol=1e-5, atol=1e-5
    )
    upper = np.triu(np.ones((T_Q, T_Q), bool), k=1)
    assert np.all(keras.ops.convert_to_numpy(weights)[:, :, upper] == 0.0)


def test_fused_self_attention_equals_separate_projections():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    layer(X, X)
    randomise(layer, seed=3)
    fused = keras.ops.convert_to_numpy(layer(X, X))  # query is value: one einsum for Q, K and V
    separate = keras.ops.convert_to_numpy(layer(X, np.array(X), key=np.array(X)))
    expected, _ = reference(layer, X, X)
    np.testing.assert_allclose(fused, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused, separate, rtol=1e-6, atol=1e-6)


def test_projection_and_attention_methods_compose_to_call():
    layer = MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3)
    layer(X, V, key=K)
    randomise(layer, seed=5)
    query = layer.project_query(X)
    keys, values = layer.project_key_value(V, K)
    assert tuple(query.shape) == (B, 2, T_Q, 4)
    assert (tuple(keys.shape), tuple(values.shape)) == ((B, 2, T_K, 4), (B, 2, T_K, 3))
    output, weights = layer.compute_attention(query, keys, values, value_mask=VALUE_MASK)
    expected, expected_weights = layer(
        X, V, key=K, value_mask=VALUE_MASK, return_attention_scores=True
    )
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(output), keras.ops.convert_to_numpy(expected)
    )
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(weights), keras.ops.convert_to_numpy(expected_weights)
    )
    reference_output, _ = reference(
        layer, X, V, K, mask=np.broadcast_to(VALUE_MASK[:, None], (B, T_Q, T_K))
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(output), reference_output, rtol=1e-5, atol=1e-5
    )


def test_project_key_value_without_key_projects_the_value_twice():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    layer(X, V)
    randomise(layer, seed=6)
    fused = layer.project_key_value(V)
    separate = layer.project_key_value(V, np.array(V))
    for a, b in zip(fused, separate, strict=True):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b), rtol=1e-6, atol=1e-6
        )


def test_cached_decoding_equals_full_causal_pass():
    length, heads, dim = 6, 2, 4
    x = RNG.normal(size=(B, length, D)).astype("float32")
    layer = MultiHeadAttention(num_heads=heads, key_dim=dim, value_dim=3)
    layer(x, x)
    randomise(layer, seed=4)
    full, full_weights = layer(x, x, use_causal_mask=True, return_attention_scores=True)

    cache = (
        np.zeros((B, heads, length, dim), "float32"),
        np.zeros((B, heads, length, 3), "float32"),
    )
    steps, step_weights = [], []
    for t in range(length):
        token = x[:, t : t + 1]
        out, weights, cache = layer(
            token,
            token,
            use_causal_mask=True,
            return_attention_scores=True,
            cache=cache,
            cache_update_index=t,
        )
        steps.append(keras.ops.convert_to_numpy(out))
        step_weights.append(keras.ops.convert_to_numpy(weights))
    np.testing.assert_allclose(
        np.concatenate(steps, 1), keras.ops.convert_to_numpy(full), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        np.concatenate(step_weights, 2),
        keras.ops.convert_to_numpy(full_weights),
        rtol=1e-5,
        atol=1e-6,
    )
    # The filled cache holds exactly the keys of the full sequence.
    expected_keys = np.einsum("btd,dhe->bhte", x, keras.ops.convert_to_numpy(layer.key_kernel))
    expected_keys += keras.ops.convert_to_numpy(layer.key_bias)[:, None]
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(cache[0]), expected_keys, rtol=1e-5, atol=1e-5
    )


@pytest.mark.tensorflow_only
def test_cache_prefill_then_step_in_graph():
    length = 5
    x = RNG.normal(size=(1, length, D)).astype("float32")
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    layer(x, x)
    full = keras.ops.convert_to_numpy(layer(x, x, use_causal_mask=True))
    empty = (np.zeros((1, 2, length, 4), "float32"), np.zeros((1, 2, length, 4), "float32"))
    prefix, cache = layer(
        x[:, :3], x[:, :3], use_causal_mask=True, cache=empty, cache_update_index=0
    )

    @tf.function
    def step(token, cache, index):
        return layer(token, token, use_causal_mask=True, cache=cache, cache_update_index=index)

    fourth, cache = step(x[:, 3:4], cache, tf.constant(3))
    fifth, _ = step(x[:, 4:5], cache, tf.constant(4))
    got = np.concatenate(
        [
            keras.ops.convert_to_numpy(prefix),
            keras.ops.convert_to_numpy(fourth),
            keras.ops.convert_to_numpy(fifth),
        ],
        axis=1,
    )
    np.testing.assert_allclose(got, full, rtol=1e-5, atol=1e-5)


def test_query_mask_zeroes_padded_queries_and_propagates():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    query_mask = np.array([[True, True, False], [True, True, True]])
    output = keras.ops.convert_to_numpy(layer(X, V, query_mask=query_mask))
    unmasked = keras.ops.convert_to_numpy(layer(X, V))
    assert np.all(output[0, 2] == 0.0)
    np.testing.assert_allclose(output[0, :2], unmasked[0, :2], rtol=1e-6)
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, D, mask_zero=True)(tokens)
    output = MultiHeadAttention(num_heads=2, key_dim=4)(embedded, embedded)
    pooled = keras.layers.GlobalAveragePooling1D()(output)  # averages real positions only
    model = keras.Model(tokens, [output, pooled])
    output, pooled = model(np.array([[1, 2, 0, 0]]))
    assert np.all(keras.ops.convert_to_numpy(output)[0, 2:] == 0.0)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(pooled)[0],
        keras.ops.convert_to_numpy(output)[0, :2].mean(0),
        rtol=1e-6,
    )


def test_fully_masked_row_gives_no_nan():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    mask = VALUE_MASK.copy()
    mask[0] = False
    output, weights = layer(X, V, value_mask=mask, return_attention_scores=True)
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(output))) and np.all(
        np.isfinite(keras.ops.convert_to_numpy(weights))
    )
    assert np.all(keras.ops.convert_to_numpy(weights)[0] == 0.0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_heads=0"):
        MultiHeadAttention(num_heads=0, key_dim=4)
    with pytest.raises(ValueError, match="key_dim='4'"):
        MultiHeadAttention(num_heads=2, key_dim="4")
    with pytest.raises(ValueError, match="value_dim=-1"):
        MultiHeadAttention(num_heads=2, key_dim=4, value_dim=-1)
    with pytest.raises(ValueError, match="output_shape=0"):
        MultiHeadAttention(num_heads=2, key_dim=4, output_shape=0)
    with pytest.raises(ValueError, match="dropout=1.0"):
        MultiHeadAttention(num_heads=2, key_dim=4, dropout=1.0)
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    cache = (np.zeros((B, 2, 4, 4), "float32"),) * 2
    with pytest.raises(ValueError, match="cache_update_index"):
        layer(X, X, cache=cache)


def test_harness_cross_attention():
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 3, "value_dim": 2, "dropout": 0.1, "output_shape": 4},
        {"query": X, "value": V},
        mask=VALUE_MASK,
        padded_input="value",
        mask_kwarg="value_mask",
        expected_output_shape=(B, T_Q, 4),
        run_saved_model_check=True,
    )


def test_harness_causal_keras_masking():
    x = RNG.normal(size=(B, 4, D)).astype("float32")
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4, "use_bias": False},
        {"query": RNG.normal(size=(B, 4, D)), "value": x},
        call_kwargs={"use_causal_mask": True},
        mask=np.array([[True] * 4, [True, True, False, False]]),
        padded_input="value",
        expected_output_shape=(B, 4, D),
        run_saved_model_check=False,
    )


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_projection_methods_compute_in_the_compute_dtype(policy):
    # The explicit path on every backend: `compute_attention` below takes it too.
    layer = MultiHeadAttention(num_heads=2, key_dim=4, dtype=policy, use_fused_attention=False)
    expected = layer(X, V)
    keys, values = layer.project_key_value(V)  # outside __call__: no Keras autocast scope
    query = layer.project_query(X)
    dtypes = {keras.backend.standardize_dtype(t.dtype) for t in (query, keys, values)}
    assert dtypes == {layer.compute_dtype}
    output, _ = layer.compute_attention(query, keys, values)
    assert keras.backend.standardize_dtype(output.dtype) == layer.compute_dtype
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(keras.ops.cast(output, "float32")),
        keras.ops.convert_to_numpy(keras.ops.cast(expected, "float32")),
    )


def test_self_attention_ignores_order_until_positions_are_added():
    """Self-attention does not see order (Vaswani et al., 2017, section 3.5): permuting the
    input sequence permutes the output rows the same way, and the attention weights with them.
    Adding a sinusoidal position encoding first breaks this."""
    from keras_attn.layers import SinusoidalPositionEncoding

    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    layer(X, X)
    randomise(layer, seed=4)
    order = np.array([2, 0, 1])
    out, weights = (
        keras.ops.convert_to_numpy(t) for t in layer(X, X, return_attention_scores=True)
    )
    permuted, permuted_weights = (
        keras.ops.convert_to_numpy(t)
        for t in layer(X[:, order], X[:, order], return_attention_scores=True)
    )
    np.testing.assert_allclose(permuted, out[:, order], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        permuted_weights, weights[:, :, order][:, :, :, order], rtol=1e-5, atol=1e-6
    )
    encode = lambda x: keras.ops.convert_to_numpy(SinusoidalPositionEncoding()(x))  # noqa: E731
    with_positions = keras.ops.convert_to_numpy(layer(X + encode(X), X + encode(X)))
    moved = X[:, order]
    moved_with_positions = keras.ops.convert_to_numpy(
        layer(moved + encode(moved), moved + encode(moved))
    )
    assert np.abs(moved_with_positions - with_positions[:, order]).max() > 1e-2


# The fused path (`keras.ops.dot_product_attention`) against the explicit softmax, same weights.
# Tolerances: float32 round-off (the fused op scales the logits, the explicit path the queries);
# under a mixed policy the tolerance the mixed-precision checks use against float32.
FUSED_TOLERANCES = {"float32": 1e-5, **MIXED_PRECISION_TOLERANCES}


def fused_and_explicit(policy="float32", self_attention=False):
    """Two built layers with the same random weights: fused path forced on, and off."""
    layers = [
        MultiHeadAttention(num_heads=2, key_dim=3, use_fused_attention=fused, dtype=policy)
        for fused in (True, False)
    ]
    for layer in layers:
        layer(X, X) if self_attention else layer(X, V, key=K)
        randomise(layer, seed=11)
    return layers


def as_float32(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


CAUSAL_PADDING = np.array([[True] * T_Q, [True, True, False]])
FULLY_MASKED = np.ones((B, T_Q, T_K), bool)
FULLY_MASKED[1, 0] = False  # query 0 of sentence 1 may see no key


@pytest.mark.parametrize(
    "case",
    [
        {},
        {"value_mask": VALUE_MASK},
        {"value_mask": VALUE_MASK, "query_mask": np.array([[True] * T_Q, [True, False, False]])},
        {"attention_mask": FULLY_MASKED, "value_mask": VALUE_MASK},
    ],
    ids=["no_mask", "padding", "query_and_key_padding", "fully_masked_row"],
)
@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16"])
def test_fused_path_equals_explicit_path_cross_attention(case, policy):
    fused, explicit = fused_and_explicit(policy)
    got, expected = fused(X, V, key=K, **case), explicit(X, V, key=K, **case)
    assert keras.backend.standardize_dtype(got.dtype) == fused.compute_dtype
    tol = FUSED_TOLERANCES[policy]
    np.testing.assert_allclose(as_float32(got), as_float32(expected), atol=tol, rtol=tol)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_fused_path_equals_explicit_path_causal_self_attention(policy):
    fused, explicit = fused_and_explicit(policy, self_attention=True)
    kwargs = {"use_causal_mask": True, "query_mask": CAUSAL_PADDING, "value_mask": CAUSAL_PADDING}
    tol = FUSED_TOLERANCES[policy]
    np.testing.assert_allclose(
        as_float32(fused(X, X, **kwargs)), as_float32(explicit(X, X, **kwargs)), atol=tol, rtol=tol
    )


def test_fully_masked_query_row_gets_a_zero_context_on_both_paths():
    # A query that may see no key has all-zero weights (keras_attn.ops.softmax), so its heads are
    # zero and its output is the output bias alone; the fused path gives the same, not the
    # uniform average of the values.
    fused, explicit = fused_and_explicit()
    for layer in (fused, explicit):
        output = as_float32(layer(X, V, key=K, attention_mask=FULLY_MASKED))
        np.testing.assert_allclose(output[1, 0], as_float32(layer.output_bias), atol=1e-6)
    _, weights = explicit(X, V, key=K, attention_mask=FULLY_MASKED, return_attention_scores=True)
    assert np.all(as_float32(weights)[1, :, 0] == 0.0)


def test_fused_cached_decoding_equals_explicit_steps():
    length, heads, dim = 5, 2, 3
    x = RNG.normal(size=(B, length, D)).astype("float32")
    padding = np.array([[True] * length, [True, True, True, False, False]])
    fused, explicit = fused_and_explicit(self_attention=True)
    empty = (np.zeros((B, heads, length, dim), "float32"),) * 2
    caches, outputs = {}, {}
    for name, layer in (("fused", fused), ("explicit", explicit)):
        # a two-token prefill, then one token per step: the causal mask is offset by the index
        out, cache = layer(
            x[:, :2],
            x[:, :2],
            use_causal_mask=True,
            value_mask=np.concatenate([padding[:, :2], np.ones((B, length - 2), bool)], 1),
            cache=empty,
            cache_update_index=0,
        )
        steps = [as_float32(out)]
        for t in range(2, length):
            key_mask = np.ones((B, length), bool)
            key_mask[:, : t + 1] = padding[:, : t + 1]
            out, cache = layer(
                x[:, t : t + 1],
                x[:, t : t + 1],
                use_causal_mask=True,
                value_mask=key_mask,
                cache=cache,
                cache_update_index=t,
            )
            steps.append(as_float32(out))
        outputs[name], caches[name] = np.concatenate(steps, 1), cache
    np.testing.assert_allclose(outputs["fused"], outputs["explicit"], atol=1e-5, rtol=1e-5)
    for got, expected in zip(caches["fused"], caches["explicit"], strict=True):
        np.testing.assert_array_equal(as_float32(got), as_float32(expected))
    full = as_float32(explicit(x, x, use_causal_mask=True, value_mask=padding))
    np.testing.assert_allclose(outputs["fused"][0], full[0], atol=1e-5, rtol=1e-5)


def test_path_choice():
    fused, explicit = fused_and_explicit()
    assert fused.uses_fused_attention() and not explicit.uses_fused_attention()
    assert not fused.uses_fused_attention(return_attention_scores=True)
    dropout = MultiHeadAttention(num_heads=2, key_dim=3, dropout=0.1, use_fused_attention=True)
    assert not dropout.uses_fused_attention(training=True)
    assert dropout.uses_fused_attention(training=False) and dropout.uses_fused_attention()
    wide_values = MultiHeadAttention(num_heads=2, key_dim=3, value_dim=4, use_fused_attention=True)
    assert not wide_values.uses_fused_attention()
    automatic = MultiHeadAttention(num_heads=2, key_dim=3)
    assert automatic.uses_fused_attention() == (keras.config.backend() in ("jax", "torch"))


def test_fused_op_called_only_when_the_weights_are_not_returned(monkeypatch):
    calls = []
    fused_op = keras.ops.dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return fused_op(*args, **kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", spy)
    fused, explicit = fused_and_explicit()
    calls.clear()
    output = fused(X, V, key=K, value_mask=VALUE_MASK)
    assert len(calls) == 1
    same, weights = fused(X, V, key=K, value_mask=VALUE_MASK, return_attention_scores=True)
    explicit(X, V, key=K, value_mask=VALUE_MASK)
    assert len(calls) == 1
    np.testing.assert_allclose(as_float32(output), as_float32(same), atol=1e-5, rtol=1e-5)
    assert tuple(weights.shape) == (B, 2, T_Q, T_K)


def test_use_fused_attention_round_trips_and_is_checked():
    layer = MultiHeadAttention(num_heads=2, key_dim=3, use_fused_attention=True)
    assert layer.get_config()["use_fused_attention"] is True
    assert MultiHeadAttention.from_config(layer.get_config()).use_fused_attention is True
    assert MultiHeadAttention(num_heads=2, key_dim=3).get_config()["use_fused_attention"] is None
    with pytest.raises(ValueError, match="use_fused_attention='yes'"):
        MultiHeadAttention(num_heads=2, key_dim=3, use_fused_attention="yes")


@pytest.mark.every_backend
def test_harness_fused_path():
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 3, "output_shape": 4, "use_fused_attention": True},
        {"query": X, "value": V},
        mask=VALUE_MASK,
        padded_input="value",
        mask_kwarg="value_mask",
        expected_output_shape=(B, T_Q, 4),
        run_saved_model_check=True,
        atol=1e-5,
        rtol=1e-5,
    )
