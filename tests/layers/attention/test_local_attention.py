import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers.attention.local_attention import LocalAttention
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.lazy_tf import tf

RNG = np.random.default_rng(11)
Q = RNG.normal(size=(2, 4, 3)).astype("float32")
V = RNG.normal(size=(2, 7, 3)).astype("float32")
MASK = np.array([[True] * 7, [True, True, True, True, True, False, False]])


def local_reference(scores, values, value_mask, positions, window, predictive):
    """Luong section 3.2 written out position by position (float64)."""
    batch, t_q, t_k = scores.shape
    weights = np.zeros((batch, t_q, t_k))
    for b in range(batch):
        for t in range(t_q):
            p_t = positions[b, t]
            allowed = [
                s for s in range(t_k) if value_mask[b, s] and p_t - window <= s <= p_t + window
            ]
            if not allowed:
                continue
            logits = np.array([scores[b, t, s] for s in allowed], dtype=np.float64)
            align = np.exp(logits - logits.max())
            align /= align.sum()
            for s, a in zip(allowed, align, strict=True):
                if predictive:
                    a = a * np.exp(-((s - p_t) ** 2) / (2 * (window / 2) ** 2))
                weights[b, t, s] = a
    return np.einsum("bqk,bkd->bqd", weights, values), weights


def test_monotonic_matches_numpy():
    layer = LocalAttention(mode="monotonic", window=1, score="general")
    context, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    scores = ref.general_score(Q, V, ops.convert_to_numpy(layer.score_fn.kernel))
    positions = np.broadcast_to(np.arange(4), (2, 4))
    expected_context, expected_weights = local_reference(scores, V, MASK, positions, 1, False)
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(context), expected_context, rtol=1e-5, atol=1e-6
    )
    # Query 0 sees keys 0 and 1 only; query 3 sees keys 2, 3, 4.
    assert np.all(ops.convert_to_numpy(weights)[:, 0, 2:] == 0.0)
    assert np.all(ops.convert_to_numpy(weights)[:, 3, :2] == 0.0) and np.all(
        ops.convert_to_numpy(weights)[:, 3, 5:] == 0.0
    )


def test_monotonic_explicit_positions_equal_stepwise_decoding():
    layer = LocalAttention(mode="monotonic", window=2, score="dot")
    full_context, full_weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    for t in range(4):
        positions = np.full((2, 1), t, dtype="int32")
        context, weights = layer(
            Q[:, t : t + 1],
            V,
            value_mask=MASK,
            query_positions=positions,
            return_attention_scores=True,
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(weights)[:, 0], ops.convert_to_numpy(full_weights)[:, t], atol=1e-7
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(context)[:, 0], ops.convert_to_numpy(full_context)[:, t], atol=1e-6
        )


def test_predictive_matches_numpy():
    layer = LocalAttention(mode="predictive", window=2, score="general", units=5)
    context, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    hidden = np.tanh(Q.astype(np.float64) @ ops.convert_to_numpy(layer.position_kernel))
    length = MASK.sum(axis=1, keepdims=True).astype(np.float64)  # S: 7 and 5
    positions = length * ref.sigmoid(hidden @ ops.convert_to_numpy(layer.position_v))
    scores = ref.general_score(Q, V, ops.convert_to_numpy(layer.score_fn.kernel))
    expected_context, expected_weights = local_reference(scores, V, MASK, positions, 2, True)
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(context), expected_context, rtol=1e-5, atol=1e-5
    )
    assert np.all(ops.convert_to_numpy(weights)[1, :, 5:] == 0.0)
    # The Gaussian factor is at most 1, so rows sum to less than one.
    assert np.all(ops.convert_to_numpy(weights).sum(-1) < 1.0)


def test_window_covering_everything_is_global_attention():
    layer = LocalAttention(mode="monotonic", window=10, score="dot")
    context, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    expected_context, expected_weights = ref.attention(ref.dot_score(Q, V), V, MASK[:, None, :])
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(context), expected_context, rtol=1e-5, atol=1e-6
    )


def test_fully_masked_row_and_empty_window_give_zeros_not_nan():
    mask = MASK.copy()
    mask[0] = False
    for mode in ("monotonic", "predictive"):
        layer = LocalAttention(mode=mode, window=1, score="dot")
        context, weights = layer(Q, V, value_mask=mask, return_attention_scores=True)
        assert np.all(np.isfinite(ops.convert_to_numpy(context))) and np.all(
            ops.convert_to_numpy(weights)[0] == 0.0
        )
    # Query 3 of a 2-key source: its window [2, 4] holds no real key.
    layer = LocalAttention(mode="monotonic", window=1, score="dot")
    short = np.array([[True, True] + [False] * 5] * 2)
    _, weights = layer(Q, V, value_mask=short, return_attention_scores=True)
    assert np.all(ops.convert_to_numpy(weights)[:, 3] == 0.0)


def test_query_keras_mask_propagates():
    tokens = keras.Input((4,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    context = LocalAttention(score="dot")(embedded, embedded)
    pooled = keras.layers.GlobalAveragePooling1D()(context)
    full, mean = keras.Model(tokens, [context, pooled])(np.array([[1, 2, 0, 0]]))
    np.testing.assert_allclose(
        ops.convert_to_numpy(mean)[0],
        ops.convert_to_numpy(full)[0, :2].mean(0),
        rtol=1e-5,
        atol=1e-6,
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode='local'"):
        LocalAttention(mode="local")
    with pytest.raises(ValueError, match="window=-1"):
        LocalAttention(window=-1)
    with pytest.raises(ValueError, match="window=0"):
        LocalAttention(mode="predictive", window=0)
    with pytest.raises(ValueError, match="units=0"):
        LocalAttention(mode="predictive", units=0)
    with pytest.raises(ValueError, match="dropout=1.0"):
        LocalAttention(dropout=1.0)
    with pytest.raises(ValueError, match="score='nope'"):
        LocalAttention(score="nope")
    with pytest.raises(ValueError, match="mode='predictive'"):
        LocalAttention(mode="predictive")(Q, V, query_positions=np.zeros((2, 4)))
    for bad in (0.0, -1.0, float("inf"), float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match="position_gradient_scale"):
            LocalAttention(mode="predictive", position_gradient_scale=bad)


def predictive_pair(scale):
    """Two local-p layers with the same weights, position_gradient_scale 1 and `scale`."""
    layers = [
        LocalAttention(mode="predictive", window=2, score="general", position_gradient_scale=s)
        for s in (1.0, scale)
    ]
    for layer in layers:
        layer(Q, V, value_mask=MASK)
    layers[1].set_weights(layers[0].get_weights())
    return layers


def loss_and_gradients(layer):
    """The context and the gradients of `sum(context * upstream)` (`tf.GradientTape` under
    TensorFlow, `jax.value_and_grad` over `layer.stateless_call` under JAX, `torch.autograd`
    under PyTorch), by weight name."""
    upstream = np.random.default_rng(5).normal(size=(2, 4, 3)).astype("float32")
    variables = layer.trainable_variables
    if keras.backend.backend() == "jax":
        import jax

        def loss(trainable):
            non_trainable = [v.value for v in layer.non_trainable_variables]
            context, _ = layer.stateless_call(trainable, non_trainable, Q, V, value_mask=MASK)
            return ops.sum(context * upstream), context

        (_, context), grads = jax.value_and_grad(loss, has_aux=True)([v.value for v in variables])
    elif keras.backend.backend() == "torch":
        import torch

        context = layer(Q, V, value_mask=MASK)
        loss = ops.sum(context * ops.convert_to_tensor(upstream))
        grads = torch.autograd.grad(loss, [v.value for v in variables])
    else:
        with tf.GradientTape() as tape:
            context = layer(Q, V, value_mask=MASK)
            loss = tf.reduce_sum(context * upstream)
        grads = tape.gradient(loss, variables)
    return ops.convert_to_numpy(context), {
        v.name: ops.convert_to_numpy(g) for v, g in zip(variables, grads, strict=True)
    }


def test_position_gradient_scale_scales_only_the_predictor_gradients():
    plain, scaled = predictive_pair(0.2)
    context, grads = loss_and_gradients(plain)
    scaled_context, scaled_grads = loss_and_gradients(scaled)
    np.testing.assert_array_equal(scaled_context, context)
    assert set(grads) == {"position_kernel", "position_v", "kernel"}
    for name in ("position_kernel", "position_v"):
        assert np.abs(grads[name]).max() > 1e-4  # the predictor does get a gradient here
        np.testing.assert_allclose(scaled_grads[name], 0.2 * grads[name], rtol=1e-5, atol=1e-8)
    np.testing.assert_array_equal(scaled_grads["kernel"], grads["kernel"])  # the score's W_a


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_position_gradient_scale_is_the_predictors_sgd_rate(optimizer):
    """Under SGD W_p and v_p move 0.25 as far; Adam's first step is about lr * sign(g) either
    way (its epsilon makes entries with a tiny gradient differ slightly)."""
    plain, scaled = predictive_pair(0.25)
    before = plain.get_weights()
    for layer in (plain, scaled):
        _, grads = loss_and_gradients(layer)
        step = keras.optimizers.get({"class_name": optimizer, "config": {"learning_rate": 0.5}})
        step.apply(
            [ops.convert_to_tensor(grads[v.name]) for v in layer.trainable_variables],
            layer.trainable_variables,
        )
    for variable, other, start in zip(
        plain.trainable_variables, scaled.trainable_variables, before, strict=True
    ):
        moved, scaled_moved = (
            ops.convert_to_numpy(variable) - start,
            ops.convert_to_numpy(other) - start,
        )
        factor = 0.25 if optimizer == "sgd" and variable.name.startswith("position") else 1.0
        # Under SGD each updated weight is rounded to float32 (half a spacing at most): the two
        # moves can differ by less than one float32 spacing of the largest weight.
        rounding = float(np.spacing(np.abs(start).max().astype("float32")))
        tolerance = {"rtol": 1e-5, "atol": rounding} if optimizer == "sgd" else {"atol": 5e-3}
        np.testing.assert_allclose(scaled_moved, factor * moved, **tolerance)


@pytest.mark.every_backend
@pytest.mark.parametrize("mode", ["monotonic", "predictive"])
def test_harness(mode):
    run_layer_test(
        LocalAttention,
        {"mode": mode, "window": 2, "score": "general", "dropout": 0.1}
        | ({"position_gradient_scale": 0.5} if mode == "predictive" else {}),
        {"query": Q, "value": V},
        mask=MASK,
        padded_input="value",
        # local-m takes the padding through Keras masking, local-p as an explicit keyword.
        mask_kwarg=None if mode == "monotonic" else "value_mask",
        expected_output_shape=(2, 4, 3),
        run_saved_model_check=mode == "predictive",
    )
