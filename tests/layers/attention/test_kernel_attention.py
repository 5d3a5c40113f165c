import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers.attention.kernel_attention import KernelAttention
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.lazy_tf import tf

RNG = np.random.default_rng(11)
B, T, D = 2, 6, 8
X = RNG.normal(size=(B, T, D)).astype("float32")
V = RNG.normal(size=(B, 5, 6)).astype("float32")
VALUE_MASK = np.array([[True] * 5, [True, True, True, False, False]])

_PARTS = ("query", "key", "value", "output")


def randomise(layer, seed=0, scale=0.5):
    rng = np.random.default_rng(seed)
    for part in _PARTS:
        for kind in ("kernel", "bias"):
            weight = getattr(layer, f"{part}_{kind}")
            weight.assign(rng.normal(scale=scale, size=weight.shape).astype("float32"))


def projections(layer, query, value):
    w = {
        f"{p}_{k}": ops.convert_to_numpy(getattr(layer, f"{p}_{k}")).astype("float64")
        for p in _PARTS
        for k in ("kernel", "bias")
    }
    q = np.einsum("btd,dhe->bhte", query, w["query_kernel"]) + w["query_bias"][:, None]
    k = np.einsum("btd,dhe->bhte", value, w["key_kernel"]) + w["key_bias"][:, None]
    v = np.einsum("btd,dhe->bhte", value, w["value_kernel"]) + w["value_bias"][:, None]
    return q, k, v, w


def phi(x, features, key_dim):
    """FAVOR+ positive features, unstabilised, in float64."""
    x = x / key_dim**0.25
    logits = np.einsum("bhte,me->bhtm", x, features) - 0.5 * np.sum(x**2, -1, keepdims=True)
    return np.exp(logits) / np.sqrt(features.shape[0])


def quadratic_reference(layer, query, value, mask=None, causal=False):
    """phi(Q) phi(K)^T V / phi(Q) phi(K)^T 1 formed explicitly (the quadratic form) in NumPy."""
    q, k, v, w = projections(layer, query, value)
    features = ops.convert_to_numpy(layer.random_features).astype("float64")
    scores = np.einsum("bhqm,bhkm->bhqk", phi(q, features, layer.key_dim), phi(k, features, 4))
    if mask is not None:
        scores = scores * mask[:, None, None, :]
    if causal:
        scores = np.tril(scores)
    weights = scores / scores.sum(-1, keepdims=True)
    heads = np.einsum("bhqk,bhke->bqhe", weights, v)
    return np.einsum("bqhe,heo->bqo", heads, w["output_kernel"]) + w["output_bias"], weights


def softmax_reference(layer, query, value):
    """Exact multi-head softmax attention (Vaswani et al., 2017) with the layer's weights."""
    q, k, v, w = projections(layer, query, value)
    weights = ref.softmax(np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(layer.key_dim))
    heads = np.einsum("bhqk,bhke->bqhe", weights, v)
    return np.einsum("bqhe,heo->bqo", heads, w["output_kernel"]) + w["output_bias"]


def test_linear_form_equals_quadratic_form_with_mask():
    layer = KernelAttention(num_heads=2, key_dim=4, num_features=32, seed=1)
    layer(X, V)
    randomise(layer, seed=1)
    output, weights = layer(X, V, value_mask=VALUE_MASK, return_attention_scores=True)
    expected, expected_weights = quadratic_reference(layer, X, V, mask=VALUE_MASK)
    np.testing.assert_allclose(ops.convert_to_numpy(output), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-6
    )
    assert np.all(ops.convert_to_numpy(weights)[1, :, :, 3:] == 0.0)


def test_causal_prefix_sums_equal_quadratic_form():
    layer = KernelAttention(num_heads=2, key_dim=4, num_features=32, causal=True, seed=2)
    layer(X, X)
    randomise(layer, seed=2)
    output, weights = layer(X, X, return_attention_scores=True)
    expected, expected_weights = quadratic_reference(layer, X, X, causal=True)
    np.testing.assert_allclose(ops.convert_to_numpy(output), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-6
    )


def test_causal_output_does_not_depend_on_later_inputs():
    layer = KernelAttention(num_heads=2, key_dim=4, num_features=16, causal=True, seed=3)
    layer(X, X)
    randomise(layer, seed=3)
    full = ops.convert_to_numpy(layer(X, X))
    for t in range(T - 1):
        changed = X.copy()
        changed[:, t + 1 :] = RNG.normal(scale=10.0, size=changed[:, t + 1 :].shape)
        out = ops.convert_to_numpy(layer(changed, changed))
        np.testing.assert_allclose(out[:, : t + 1], full[:, : t + 1], rtol=1e-6, atol=1e-6)
        assert not np.allclose(out[:, t + 1 :], full[:, t + 1 :], atol=1e-3)


def test_approximates_softmax_attention_with_many_features():
    # The estimator's error shrinks like 1/sqrt(m): with m = 4096 features and moderate scores
    # (|scores| ~ 0.3) the outputs (mean |out| ~ 0.19) are within 0.02 of exact softmax attention,
    # with m = 8 the error is several times larger.
    x = RNG.normal(scale=0.5, size=(1, 8, 8)).astype("float32")
    errors = {}
    for m in (8, 4096):
        layer = KernelAttention(num_heads=2, key_dim=4, num_features=m, seed=4)
        layer(x, x)
        randomise(layer, seed=4, scale=0.3)
        exact = softmax_reference(layer, x, x)
        errors[m] = np.max(np.abs(ops.convert_to_numpy(layer(x, x)) - exact))
    assert errors[4096] < 0.02, errors
    assert errors[8] > 3 * errors[4096], errors


def test_random_features_are_orthogonal_blocks_and_fixed():
    layer = KernelAttention(num_heads=1, key_dim=4, num_features=8, seed=5)
    layer(X, X)
    features = ops.convert_to_numpy(layer.random_features)
    assert not layer.random_features.trainable
    for block in (features[:4], features[4:]):
        gram = block @ block.T
        np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0.0, atol=1e-5)
    # Marginally N(0, I): zero mean, identity second moment (a biased QR sign convention fails).
    many = KernelAttention(num_heads=1, key_dim=4, num_features=8192, seed=5)
    many(X, X)
    rows = ops.convert_to_numpy(many.random_features).astype("float64")
    np.testing.assert_allclose(rows.mean(0), 0.0, atol=0.05)
    np.testing.assert_allclose(rows.T @ rows / len(rows), np.eye(4), atol=0.06)
    again = KernelAttention(num_heads=1, key_dim=4, num_features=8, seed=5)
    again(X, X)
    np.testing.assert_array_equal(ops.convert_to_numpy(again.random_features), features)
    assert "random_features" not in [w.name for w in layer.trainable_weights]


def test_fully_masked_row_gives_no_nan():
    for causal in (False, True):
        layer = KernelAttention(num_heads=2, key_dim=4, num_features=8, causal=causal, seed=6)
        mask = np.ones((B, T), bool)
        mask[0] = False
        output, weights = layer(X, X, value_mask=mask, return_attention_scores=True)
        assert np.all(np.isfinite(ops.convert_to_numpy(output))) and np.all(
            np.isfinite(ops.convert_to_numpy(weights))
        )
        assert np.all(ops.convert_to_numpy(weights)[0] == 0.0)


def test_query_mask_zeroes_padded_queries_and_flows_on():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, D, mask_zero=True)(tokens)
    output = KernelAttention(num_heads=2, key_dim=4, num_features=8, seed=8)(embedded, embedded)
    pooled = keras.layers.GlobalAveragePooling1D()(output)  # averages real positions only
    model = keras.Model(tokens, [output, pooled])
    output, pooled = model(np.array([[1, 2, 0, 0]]))
    assert np.all(ops.convert_to_numpy(output)[0, 2:] == 0.0) and np.all(
        ops.convert_to_numpy(output)[0, :2] != 0.0
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(pooled)[0], ops.convert_to_numpy(output)[0, :2].mean(0), rtol=1e-6
    )


def test_features_redrawn_every_interval_training_calls_deterministically():
    def run(layer):
        layer(X, X)
        drawn = [ops.convert_to_numpy(layer.random_features)]
        for training in (True, False, True, True, None, True):
            layer(X, X, training=training)
            drawn.append(ops.convert_to_numpy(layer.random_features))
        return drawn

    layer = KernelAttention(num_heads=1, key_dim=4, num_features=8, redraw_interval=2, seed=9)
    drawn = run(layer)
    # Training calls 1..4 happen at steps 1, 3, 4, 6: redraws after calls 2 (step 3) and 4 (6).
    changed = [not np.array_equal(a, b) for a, b in zip(drawn, drawn[1:], strict=False)]
    assert changed == [False, False, True, False, False, True], changed
    assert int(ops.convert_to_numpy(layer.training_calls)) == 4
    for block in (drawn[-1][:4], drawn[-1][4:]):  # redraws are orthogonal blocks too
        gram = block @ block.T
        np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0.0, atol=1e-5)
    again = run(KernelAttention(num_heads=1, key_dim=4, num_features=8, redraw_interval=2, seed=9))
    for a, b in zip(drawn, again, strict=True):
        np.testing.assert_array_equal(a, b)
    before = ops.convert_to_numpy(layer.random_features)
    layer.redraw_features()  # on demand
    assert not np.array_equal(ops.convert_to_numpy(layer.random_features), before)
    never = KernelAttention(num_heads=1, key_dim=4, num_features=8, seed=9)
    assert all(np.array_equal(a, drawn[0]) for a in run(never))


def test_redraw_inside_a_compiled_train_step_and_saved_features(tmp_path):
    inputs = keras.Input((T, D))
    layer = KernelAttention(num_heads=2, key_dim=4, num_features=8, redraw_interval=3, seed=1)
    model = keras.Model(inputs, layer(inputs, inputs))
    model.compile(optimizer="sgd", loss="mse", jit_compile=False)
    initial = ops.convert_to_numpy(layer.random_features)
    model.fit(X, np.zeros_like(X), batch_size=1, epochs=2, verbose=0)  # 4 training calls
    assert int(ops.convert_to_numpy(layer.training_calls)) == 4
    redrawn = ops.convert_to_numpy(layer.random_features)
    assert not np.array_equal(redrawn, initial)
    path = str(tmp_path / "kernel.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(ops.convert_to_numpy(loaded.layers[-1].random_features), redrawn)
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded(X)), ops.convert_to_numpy(model(X)), rtol=1e-6, atol=1e-6
    )


def dropped_reference(layer, query, value, keep, rate):
    """Undropped weights alpha, values scaled per key by keep / (1 - rate): numerator only."""
    q, k, v, w = projections(layer, query, value)
    features = ops.convert_to_numpy(layer.random_features).astype("float64")
    scores = np.einsum("bhqm,bhkm->bhqk", phi(q, features, 4), phi(k, features, 4))
    weights = scores / scores.sum(-1, keepdims=True)
    dropped = weights * keep[:, :, None, :] / (1.0 - rate)  # (batch, heads, T_q, T_k)
    heads = np.einsum("bhqk,bhke->bqhe", dropped, v)
    return np.einsum("bqhe,heo->bqo", heads, w["output_kernel"]) + w["output_bias"]


def test_dropout_drops_keys_from_the_numerator_only():
    rate, seed = 0.5, 12
    layer = KernelAttention(num_heads=2, key_dim=4, num_features=16, dropout=rate, seed=seed)
    layer(X, V)
    randomise(layer, seed=5)
    inference = ops.convert_to_numpy(layer(X, V, training=False))
    np.testing.assert_allclose(inference, quadratic_reference(layer, X, V)[0], rtol=1e-5, atol=1e-5)
    # The first training call draws its mask from a generator seeded with seed + 1: replay it.
    twin = keras.random.SeedGenerator(seed + 1)
    keep = ops.convert_to_numpy(
        keras.random.dropout(ops.ones((B, 2, 5, 1), "float32"), rate, seed=twin)
    )
    keep = (keep[..., 0] > 0).astype("float64")  # (batch, heads, T_k)
    assert 0 < keep.sum() < keep.size
    dropped = ops.convert_to_numpy(layer(X, V, training=True))
    expected = dropped_reference(layer, X, V, keep, rate)
    np.testing.assert_allclose(dropped, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.tensorflow_only
def test_dropout_is_unbiased():
    # Each training call is sum_s alpha_ts (m_s / (1 - p)) V_s: the mean of many calls converges
    # to the undropped output (within 5 standard errors of the mean, per entry).
    layer = KernelAttention(num_heads=2, key_dim=4, num_features=16, dropout=0.3, seed=2)
    undropped = ops.convert_to_numpy(layer(X, V))
    dropped = tf.function(lambda: layer(X, V, training=True))  # traced once: cheap draws
    draws = np.stack([ops.convert_to_numpy(dropped()) for _ in range(300)])
    standard_error = draws.std(0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(0) - undropped) <= 5 * standard_error + 1e-6)
    assert np.abs(draws[0] - undropped).max() > 1e-2  # the draws do differ


@pytest.mark.tensorflow_only
def test_token_by_token_with_the_cache_equals_the_causal_pass():
    layer = KernelAttention(num_heads=2, key_dim=4, value_dim=3, num_features=16, causal=True)
    layer(X, X)
    rng = np.random.default_rng(8)
    for weight in layer.trainable_weights:
        weight.assign(rng.normal(scale=0.5, size=weight.shape).astype("float32"))
    full = ops.convert_to_numpy(layer(X, X))
    cache = layer.initial_cache(B)
    steps = []
    for t in range(T):
        step, cache = layer(X[:, t : t + 1], X[:, t : t + 1], cache=cache)
        steps.append(ops.convert_to_numpy(step))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-5, atol=1e-5)
    # Chunks of several tokens, in a compiled function, give the same outputs.
    step_fn = tf.function(lambda x, cache: layer(x, x, cache=cache))
    first, cache = step_fn(X[:, :2], layer.initial_cache(B))
    second, cache = step_fn(X[:, 2:], cache)
    chunked = np.concatenate([ops.convert_to_numpy(first), ops.convert_to_numpy(second)], axis=1)
    np.testing.assert_allclose(chunked, full, rtol=1e-5, atol=1e-5)
    assert tuple(cache[0].shape) == (B, 2, 16, 3) and tuple(cache[1].shape) == (B, 2, 16)


def test_cache_needs_the_causal_variant_and_no_weights():
    layer = KernelAttention(num_heads=2, key_dim=4, num_features=8)
    with pytest.raises(ValueError, match="causal=False"):
        layer(X[:, :1], X[:, :1], cache=layer.initial_cache(B))
    causal = KernelAttention(num_heads=2, key_dim=4, num_features=8, causal=True)
    with pytest.raises(ValueError, match="return_attention_scores=True with a cache"):
        causal(X[:, :1], X[:, :1], cache=causal.initial_cache(B), return_attention_scores=True)


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_features=0"):
        KernelAttention(num_heads=2, key_dim=4, num_features=0)
    with pytest.raises(ValueError, match="num_heads=-2"):
        KernelAttention(num_heads=-2, key_dim=4)
    with pytest.raises(ValueError, match="causal='yes'"):
        KernelAttention(num_heads=2, key_dim=4, causal="yes")
    with pytest.raises(ValueError, match="seed=1.5"):
        KernelAttention(num_heads=2, key_dim=4, seed=1.5)
    with pytest.raises(ValueError, match="output_shape=0"):
        KernelAttention(num_heads=2, key_dim=4, output_shape=0)
    with pytest.raises(ValueError, match="redraw_interval=0"):
        KernelAttention(num_heads=2, key_dim=4, redraw_interval=0)
    with pytest.raises(ValueError, match="dropout=1.0"):
        KernelAttention(num_heads=2, key_dim=4, dropout=1.0)


def test_harness_cross_attention_value_mask():
    run_layer_test(
        KernelAttention,
        {"num_heads": 2, "key_dim": 4, "value_dim": 3, "num_features": 8, "output_shape": 4},
        {"query": RNG.normal(size=(B, 3, D)), "value": V},
        mask=VALUE_MASK,
        padded_input="value",
        mask_kwarg="value_mask",
        expected_output_shape=(B, 3, 4),
        run_saved_model_check=True,
    )


@pytest.mark.every_backend
def test_harness_causal_keras_masking():
    run_layer_test(
        KernelAttention,
        {
            "num_heads": 2,
            "key_dim": 4,
            "num_features": 8,
            "causal": True,
            "seed": 7,
            "redraw_interval": 50,
            "dropout": 0.1,
        },
        {"query": RNG.normal(size=(B, 4, D)), "value": RNG.normal(size=(B, 4, D))},
        mask=np.array([[True] * 4, [True, True, False, False]]),
        padded_input="value",
        expected_output_shape=(B, 4, D),
        run_saved_model_check=False,
    )
