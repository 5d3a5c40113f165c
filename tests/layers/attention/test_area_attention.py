import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers.attention.area_attention import AreaAttention
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(5)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
V = RNG.normal(size=(2, 5, 4)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])
POOL = {"mean": np.mean, "max": np.max, "sum": np.sum}


def area_reference(keys, values, value_mask, max_width, key_pooling="mean", value_pooling="sum"):
    """Areas enumerated one by one: (start, width) list, area keys, values and validity."""
    length = keys.shape[1]
    spans = [(s, w) for w in range(1, min(max_width, length) + 1) for s in range(length - w + 1)]
    area_keys = np.stack([POOL[key_pooling](keys[:, s : s + w], axis=1) for s, w in spans], 1)
    area_values = np.stack([POOL[value_pooling](values[:, s : s + w], axis=1) for s, w in spans], 1)
    valid = np.stack([value_mask[:, s : s + w].all(axis=1) for s, w in spans], 1)
    return spans, area_keys.astype(np.float64), area_values.astype(np.float64), valid


def test_matches_numpy_basic_area_attention():
    layer = AreaAttention(max_area_width=3, score="dot")
    context, weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    spans, keys, values, valid = area_reference(V, V, MASK, 3)
    assert layer.area_spans(5) == spans and len(spans) == 5 + 4 + 3
    expected_context, expected_weights = ref.attention(
        ref.dot_score(Q.astype(np.float64), keys), values, valid[:, None, :]
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(context), expected_context, rtol=1e-5, atol=1e-5
    )
    # Example 1 has 3 real positions: only areas inside them are attended.
    attended = [
        span for span, w in zip(spans, ops.convert_to_numpy(weights)[1, 0], strict=True) if w > 0
    ]
    assert attended == [(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (0, 3)]


@pytest.mark.parametrize(("key_pooling", "value_pooling"), [("max", "mean"), ("sum", "max")])
def test_other_poolings_and_separate_keys(key_pooling, value_pooling):
    keys = RNG.normal(size=(2, 5, 6)).astype("float32")
    layer = AreaAttention(
        max_area_width=2, score="general", key_pooling=key_pooling, value_pooling=value_pooling
    )
    context, weights = layer(Q, V, key=keys, value_mask=MASK, return_attention_scores=True)
    _, area_keys, area_values, valid = area_reference(keys, V, MASK, 2, key_pooling, value_pooling)
    scores = ref.general_score(Q, area_keys, ops.convert_to_numpy(layer.score_fn.kernel))
    expected_context, expected_weights = ref.attention(scores, area_values, valid[:, None, :])
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(context), expected_context, rtol=1e-5, atol=1e-5
    )


def test_width_one_is_ordinary_attention_and_width_is_capped():
    context = ops.convert_to_numpy(
        AreaAttention(max_area_width=1, score="dot")(Q, V, value_mask=MASK)
    )
    expected, _ = ref.attention(ref.dot_score(Q, V), V, MASK[:, None, :])
    np.testing.assert_allclose(context, expected, rtol=1e-5, atol=1e-6)
    layer = AreaAttention(max_area_width=9, score="dot")
    _, weights = layer(Q, V, return_attention_scores=True)
    assert weights.shape == (2, 3, 15) and layer.area_spans(5)[-1] == (0, 5)


def test_padded_areas_get_zero_weight_and_fully_masked_row_is_finite():
    mask = MASK.copy()
    mask[0] = False
    noisy = V.copy()
    noisy[~mask] = 1e3
    layer = AreaAttention(max_area_width=2, score="dot")
    context, weights = layer(Q, noisy, value_mask=mask, return_attention_scores=True)
    _, _, _, valid = area_reference(V, V, mask, 2)
    assert np.all(
        ops.convert_to_numpy(weights)[np.broadcast_to(~valid[:, None, :], weights.shape)] == 0.0
    )
    assert np.all(np.isfinite(ops.convert_to_numpy(context))) and np.all(
        ops.convert_to_numpy(context)[0] == 0.0
    )
    clean = ops.convert_to_numpy(layer(Q, V, value_mask=mask))
    np.testing.assert_allclose(ops.convert_to_numpy(context), clean, rtol=1e-6, atol=1e-6)


def test_weights_over_areas_in_a_saved_model(tmp_path):
    query = keras.Input((3, 4))
    value = keras.Input((5, 4))
    value_mask = keras.Input((5,), dtype="bool")
    layer = AreaAttention(max_area_width=2, score="general")
    outputs = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    model = keras.Model([query, value, value_mask], outputs)
    context, weights = model([Q, V, MASK])
    assert tuple(weights.shape) == (2, 3, 9)
    eager_context, eager_weights = layer(Q, V, value_mask=MASK, return_attention_scores=True)
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), ops.convert_to_numpy(eager_weights), atol=1e-7
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(context), ops.convert_to_numpy(eager_context), atol=1e-6
    )
    path = str(tmp_path / "area.keras")
    model.save(path)
    loaded_context, loaded_weights = keras.saving.load_model(path)([Q, V, MASK])
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded_weights), ops.convert_to_numpy(weights), atol=1e-7
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded_context), ops.convert_to_numpy(context), atol=1e-6
    )


def test_query_keras_mask_propagates():
    tokens = keras.Input((4,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    context = AreaAttention(score="dot")(embedded, embedded)
    pooled = keras.layers.GlobalAveragePooling1D()(context)
    full, mean = keras.Model(tokens, [context, pooled])(np.array([[1, 2, 0, 0]]))
    np.testing.assert_allclose(
        ops.convert_to_numpy(mean)[0],
        ops.convert_to_numpy(full)[0, :2].mean(0),
        rtol=1e-5,
        atol=1e-6,
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_area_width=0"):
        AreaAttention(max_area_width=0)
    with pytest.raises(ValueError, match="key_pooling='median'"):
        AreaAttention(key_pooling="median")
    with pytest.raises(ValueError, match="value_pooling='concat'"):
        AreaAttention(value_pooling="concat")
    with pytest.raises(ValueError, match="dropout=-0.1"):
        AreaAttention(dropout=-0.1)
    with pytest.raises(ValueError, match="distribution='nope'"):
        AreaAttention(distribution="nope")


def area_mask(value_mask):
    """The harness' `weights_mask`: an area may get weight only if all its members are real."""
    return area_reference(V, V, value_mask, max_width=2)[3]  # (batch, N), N = 5 + 4


@pytest.mark.every_backend
def test_harness():
    # The weights run over the N areas: the hook maps the position mask to the area mask, built
    # here by enumerating the areas, independently of the layer's own `_area_mask`.
    run_layer_test(
        AreaAttention,
        {"max_area_width": 2, "score": "general", "key_pooling": "mean", "dropout": 0.1},
        {"query": Q, "value": V},
        mask=MASK,
        padded_input="value",
        mask_kwarg="value_mask",
        weights_mask=area_mask,
        expected_output_shape=(2, 3, 4),
        run_saved_model_check=True,
    )


def test_attention_mask_over_areas():
    layer = AreaAttention(max_area_width=2, score="dot")
    query = np.ones((1, 2, 4), "float32")
    value = np.arange(12, dtype="float32").reshape(1, 3, 4) / 10.0
    allowed = np.array([[[True, False, True, False, True], [False] * 4 + [True]]])
    context, weights = layer(query, value, attention_mask=allowed, return_attention_scores=True)
    weights = ops.convert_to_numpy(weights)
    assert np.all(weights[~allowed] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(weights[0, 1], [0, 0, 0, 0, 1.0])
    # The only allowed area of the second query is (1, 2): the sum of values 1 and 2.
    np.testing.assert_allclose(
        ops.convert_to_numpy(context)[0, 1], value[0, 1] + value[0, 2], rtol=1e-6
    )
