import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers.attention.hierarchical_attention import HierarchicalAttention
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(4)
X = RNG.normal(size=(2, 3, 4, 5)).astype("float32")  # (batch, S, W, d)
WORD_MASK = np.array(
    [
        [[True, True, True, True], [True, True, False, False], [True, False, True, False]],
        [[True, True, True, False], [False, False, False, False], [True, False, False, False]],
    ]
)
SENTENCE_MASK = np.array([[True, True, True], [True, True, False]])


def gru_sequence(x, mask, kernel, recurrent_kernel, bias, reverse=False):
    """Keras GRU (reset_after=True, gate order z, r, h); masked steps carry the state."""
    batch, steps, _ = x.shape
    h = np.zeros((batch, recurrent_kernel.shape[0]))
    outputs = np.zeros((batch, steps, h.shape[1]))
    for t in range(steps - 1, -1, -1) if reverse else range(steps):
        x_z, x_r, x_h = np.split(x[:, t] @ kernel + bias[0], 3, axis=-1)
        h_z, h_r, h_h = np.split(h @ recurrent_kernel + bias[1], 3, axis=-1)
        z, r = ref.sigmoid(x_z + h_z), ref.sigmoid(x_r + h_r)
        candidate = np.tanh(x_h + r * h_h)
        h = np.where(mask[:, t : t + 1], z * h + (1 - z) * candidate, h)
        outputs[:, t] = h
    return outputs


def bigru(x, mask, encoder):
    forward = encoder.rnn.forward_layer.get_weights()
    backward = encoder.rnn.backward_layer.get_weights()
    return np.concatenate(
        [gru_sequence(x, mask, *forward), gru_sequence(x, mask, *backward, reverse=True)], -1
    )


def pooling(h, mask, attention):
    kernel, bias, context = attention.get_weights()
    weights = ref.softmax(np.tanh(h @ kernel + bias) @ context, mask)
    return np.einsum("bt,btd->bd", weights, h), weights


def numpy_han(x, word_mask, layer):
    """Yang et al. (2016) section 2: BiGRU + attention over words, then over sentences."""
    batch, sentences, words, depth = x.shape
    flat_x = x.reshape(-1, words, depth).astype(np.float64)
    flat_mask = word_mask.reshape(-1, words)
    word_states = bigru(flat_x, flat_mask, layer.word_encoder)
    sentence_vectors, word_weights = pooling(word_states, flat_mask, layer.word_attention)
    sentence_vectors = sentence_vectors.reshape(batch, sentences, -1)
    sentence_mask = word_mask.any(-1)
    sentence_states = bigru(sentence_vectors, sentence_mask, layer.sentence_encoder)
    document, sentence_weights = pooling(sentence_states, sentence_mask, layer.sentence_attention)
    return document, word_weights.reshape(batch, sentences, words), sentence_weights


def test_matches_numpy_reference_with_word_mask():
    layer = HierarchicalAttention(word_units=3, sentence_units=2)
    layer(X, mask=WORD_MASK)
    for attention in (layer.word_attention, layer.sentence_attention):
        attention.bias.assign(RNG.normal(size=attention.bias.shape).astype("float32"))
    document, (word_weights, sentence_weights) = layer(
        X, mask=WORD_MASK, return_attention_scores=True
    )
    expected = numpy_han(X, WORD_MASK, layer)
    np.testing.assert_allclose(
        ops.convert_to_numpy(word_weights), expected[1], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(sentence_weights), expected[2], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(ops.convert_to_numpy(document), expected[0], rtol=1e-5, atol=1e-6)
    # Padded words and the fully padded sentence get exactly zero weight, and no NaN anywhere.
    assert np.all(ops.convert_to_numpy(word_weights)[~WORD_MASK] == 0.0)
    assert np.all(ops.convert_to_numpy(sentence_weights)[1, 1] == 0.0)
    np.testing.assert_allclose(
        ops.convert_to_numpy(word_weights)[WORD_MASK.any(-1)].sum(-1), 1.0, rtol=1e-6
    )
    np.testing.assert_allclose(ops.convert_to_numpy(sentence_weights).sum(-1), 1.0, rtol=1e-6)
    # The padded words' values do not matter.
    noisy = np.where(WORD_MASK[..., None], X, 1e3 * RNG.normal(size=X.shape)).astype("float32")
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(noisy, mask=WORD_MASK)),
        ops.convert_to_numpy(document),
        atol=1e-6,
    )


def test_sentence_mask_equals_broadcast_word_mask():
    layer = HierarchicalAttention(word_units=2, sentence_units=2, encoder="lstm")
    from_sentences = layer(X, mask=SENTENCE_MASK, return_attention_scores=True)
    word_mask = np.broadcast_to(SENTENCE_MASK[..., None], WORD_MASK.shape)
    from_words = layer(X, mask=word_mask, return_attention_scores=True)
    flat_sentences, flat_words = keras.tree.flatten(from_sentences), keras.tree.flatten(from_words)
    for a, b in zip(flat_sentences, flat_words, strict=True):
        np.testing.assert_array_equal(ops.convert_to_numpy(a), ops.convert_to_numpy(b))
    assert np.all(ops.convert_to_numpy(from_sentences[1][1])[1, 2] == 0.0)


def test_keras_masking_from_word_ids_and_empty_document():
    ids = keras.Input((3, 4), dtype="int32")
    embedded = keras.layers.Embedding(20, 5, mask_zero=True)(ids)
    outputs = HierarchicalAttention(2, 2)(embedded, return_attention_scores=True)
    model = keras.Model(ids, keras.tree.flatten(outputs))
    batch = np.array([[[1, 2, 0, 0], [0, 0, 0, 0], [3, 4, 5, 6]], np.zeros((3, 4), "int32")])
    document, word_weights, sentence_weights = (ops.convert_to_numpy(x) for x in model(batch))
    np.testing.assert_array_equal(word_weights[0, 0, 2:], 0.0)
    np.testing.assert_array_equal(word_weights[0, 1], 0.0)
    np.testing.assert_array_equal(sentence_weights[0, 1], 0.0)
    np.testing.assert_allclose(sentence_weights[0].sum(), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(document[1], 0.0)
    assert np.all(np.isfinite(document))


def test_bad_arguments():
    with pytest.raises(ValueError, match="word_units=0"):
        HierarchicalAttention(0, 2)
    with pytest.raises(ValueError, match="sentence_units=2.5"):
        HierarchicalAttention(2, 2.5)
    with pytest.raises(ValueError, match="encoder='rnn'"):
        HierarchicalAttention(2, 2, encoder="rnn")


def word_and_sentence_masks(sentence_mask):
    """The harness' `weights_mask`: a padded sentence pads all its words.

    Word weights `(batch, S, W)`, sentence weights `(batch, S)`.
    """
    words = np.broadcast_to(sentence_mask[..., None], sentence_mask.shape + (X.shape[2],))
    return words, sentence_mask


@pytest.mark.every_backend
def test_harness():
    # Both levels' weights go through every check: zero on padded sentences (all their words
    # included), saved, exported, cast and trained through.
    run_layer_test(
        HierarchicalAttention,
        {"word_units": 3, "sentence_units": 2, "encoder": "gru"},
        {"inputs": X},
        mask=SENTENCE_MASK,
        padded_input="inputs",
        weights_mask=word_and_sentence_masks,
        expected_output_shape=(2, 4),
        run_saved_model_check=True,
    )


def test_gru_form_reaches_both_encoders_and_the_config():
    layer = HierarchicalAttention(4, 3, reset_after=False)
    x = np.random.default_rng(0).normal(size=(2, 3, 5, 6)).astype("float32")
    layer(x)
    cells = [
        rnn.cell
        for encoder in (layer.word_encoder, layer.sentence_encoder)
        for rnn in (encoder.rnn.forward_layer, encoder.rnn.backward_layer)
    ]
    assert [cell.reset_after for cell in cells] == [False] * 4
    # Cho et al.'s form has one bias vector per gate set; Keras' default form has two.
    assert [tuple(cell.bias.shape) for cell in cells] == [(12,), (12,), (9,), (9,)]
    restored = HierarchicalAttention.from_config(layer.get_config())
    assert restored.reset_after is False
    assert HierarchicalAttention(4, 3).get_config()["reset_after"] is True
    with pytest.raises(ValueError, match="reset_after"):
        HierarchicalAttention(4, 3, encoder="lstm", reset_after=False)
