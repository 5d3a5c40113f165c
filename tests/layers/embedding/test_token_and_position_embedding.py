import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import TokenAndPositionEmbedding
from keras_attn.testing import run_layer_test
from tests.lazy_tf import tf

IDS = np.array([[4, 1, 7, 2, 9], [3, 8, 5, 0, 0]], "int32")
V, D = 10, 6


def sinusoid(length, dim, start=0):
    pos = np.arange(start, start + length)[:, None]
    pair = (np.arange(dim) // 2 * 2)[None] / dim
    angle = pos / 10000.0**pair
    return np.where(np.arange(dim) % 2 == 0, np.sin(angle), np.cos(angle))


@pytest.mark.parametrize("scale", [True, False])
def test_sinusoidal_matches_numpy(scale):
    layer = TokenAndPositionEmbedding(V, D, scale_embeddings=scale)
    output = ops.convert_to_numpy(layer(IDS))
    table = ops.convert_to_numpy(layer.embeddings).astype("float64")
    factor = np.sqrt(D) if scale else 1.0
    expected = table[IDS] * factor + sinusoid(5, D)
    np.testing.assert_allclose(output, expected, rtol=1e-6, atol=1e-6)


def test_learned_matches_numpy():
    layer = TokenAndPositionEmbedding(V, D, max_length=8, position_encoding="learned")
    output = ops.convert_to_numpy(layer(IDS))
    table = ops.convert_to_numpy(layer.embeddings)
    positions = ops.convert_to_numpy(layer.position_layer.position_embeddings)
    expected = table[IDS] * np.sqrt(D) + positions[:5]
    np.testing.assert_allclose(output, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("position_encoding", ["sinusoidal", "learned"])
def test_one_id_at_start_index_equals_row_of_full_pass(position_encoding):
    layer = TokenAndPositionEmbedding(V, D, max_length=5, position_encoding=position_encoding)
    full = ops.convert_to_numpy(layer(IDS))

    @tf.function
    def step_fn(ids, index):
        return layer(ids, start_index=index)

    for k in range(5):
        step = ops.convert_to_numpy(step_fn(tf.constant(IDS[:, k : k + 1]), tf.constant(k)))
        np.testing.assert_allclose(step[:, 0], full[:, k], rtol=1e-6, atol=1e-6)
        eager = ops.convert_to_numpy(layer(IDS[:, k : k + 1], start_index=k))
        np.testing.assert_allclose(eager[:, 0], full[:, k], rtol=1e-6, atol=1e-6)


def test_mask_zero_gives_a_keras_mask():
    layer = TokenAndPositionEmbedding(V, D, mask_zero=True)
    output = layer(IDS)
    np.testing.assert_array_equal(ops.convert_to_numpy(output._keras_mask), IDS != 0)
    assert getattr(TokenAndPositionEmbedding(V, D)(IDS), "_keras_mask", None) is None


@pytest.mark.tensorflow_only
def test_reverse_is_the_tied_output_projection():
    layer = TokenAndPositionEmbedding(V, D)
    hidden = np.random.default_rng(0).normal(size=(2, 3, D)).astype("float32")
    layer(IDS)
    logits = ops.convert_to_numpy(layer(hidden, reverse=True))
    np.testing.assert_allclose(
        logits, hidden @ ops.convert_to_numpy(layer.embeddings).T, rtol=1e-5, atol=1e-5
    )
    # one matrix: the gradient of a loss on the logits reaches the embedding table
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(hidden, reverse=True) ** 2)
    assert len(layer.trainable_weights) == 1
    grad = tape.gradient(loss, layer.trainable_weights[0].value)
    assert np.all(np.isfinite(ops.convert_to_numpy(grad))) and np.any(
        ops.convert_to_numpy(grad) != 0
    )


def test_tied_language_model_in_a_functional_model():
    ids = keras.Input((None,), dtype="int32")
    embedding = TokenAndPositionEmbedding(V, D, mask_zero=True)
    logits = embedding(keras.layers.Dense(D)(embedding(ids)), reverse=True)
    model = keras.Model(ids, logits)
    assert model(IDS).shape == (2, 5, V)
    assert len(model.trainable_weights) == 3  # E, and the Dense kernel and bias


def test_dropout_only_in_training():
    layer = TokenAndPositionEmbedding(V, D, dropout=0.5)
    inference = ops.convert_to_numpy(layer(IDS))
    np.testing.assert_array_equal(ops.convert_to_numpy(layer(IDS, training=False)), inference)
    assert np.any(ops.convert_to_numpy(layer(IDS, training=True)) == 0.0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="vocabulary_size=0"):
        TokenAndPositionEmbedding(0, D)
    with pytest.raises(ValueError, match="position_encoding='rotary'"):
        TokenAndPositionEmbedding(V, D, position_encoding="rotary")
    with pytest.raises(ValueError, match="max_length=None"):
        TokenAndPositionEmbedding(V, D, position_encoding="learned")
    with pytest.raises(ValueError, match="dropout=-0.1"):
        TokenAndPositionEmbedding(V, D, dropout=-0.1)


@pytest.mark.every_backend
@pytest.mark.parametrize("position_encoding", ["sinusoidal", "learned"])
def test_harness(position_encoding):
    run_layer_test(
        TokenAndPositionEmbedding,
        {
            "vocabulary_size": V,
            "embedding_dim": D,
            "max_length": 5,
            "position_encoding": position_encoding,
            "mask_zero": True,
            "dropout": 0.1,
        },
        {"inputs": IDS},
        mask=IDS != 0,
        padded_input="inputs",
        weights_kwarg=None,
        expected_output_shape=(2, 5, D),
        run_saved_model_check=position_encoding == "learned",
    )
