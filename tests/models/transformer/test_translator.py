import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.decoding import beam_search, greedy_search
from keras_attn.models import TransformerTranslatorSteps, transformer_translator
from keras_attn.models.transformer.translator import (
    DECODER,
    ENCODER,
    SOURCE_EMBEDDING,
    TARGET_EMBEDDING,
)
from tests.lazy_tf import tf

START, END = 2, 3


def tiny_model(**kwargs):
    settings = dict(num_layers=2, d_model=8, num_heads=2, ff_dim=16, dropout=0.0)
    settings.update(kwargs)
    return transformer_translator(30, 25, **settings)


def source_batch():
    source = np.random.default_rng(0).integers(4, 30, size=(3, 6)).astype("int32")
    source[1, 4:] = 0
    return source


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("normalize_first", [False, True])
def test_cached_steps_equal_the_teacher_forced_pass(normalize_first):
    model = tiny_model(normalize_first=normalize_first)
    steps = TransformerTranslatorSteps(model, max_length=7)
    source = source_batch()
    target = np.random.default_rng(1).integers(4, 25, size=(3, 7)).astype("int32")
    target[:, 0] = START
    full = ops.convert_to_numpy(model({"source_ids": source, "target_ids": target}))
    state = steps.encode(source)
    step = tf.function(steps.step)  # the graph the decoding loop runs
    for t in range(7):
        logits, state = step(tf.constant(target[:, t]), state)
        assert logits.dtype == tf.float32
        np.testing.assert_allclose(ops.convert_to_numpy(logits), full[:, t], atol=1e-5, rtol=1e-5)
        assert int(state["index"]) == t + 1
    # The alignment: last layer's cross-attention averaged over heads, zero on source padding.
    attention = ops.convert_to_numpy(state["attention"])
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
    assert np.all(attention[1, 4:] == 0.0)


def test_alignment_is_the_last_layers_cross_attention_averaged_over_heads():
    model = tiny_model()
    steps = TransformerTranslatorSteps(model, max_length=4)
    source = source_batch()
    target = np.array([[START, 5, 6]] * 3, "int32")
    embedded = steps.target_embedding(target)
    memory = steps.encoder(steps.source_embedding(source), inputs_mask=source != 0)
    _, scores = steps.decoder(
        embedded, memory, memory_mask=source != 0, return_attention_scores=True
    )
    expected = ops.convert_to_numpy(scores["cross_attention"])[:, -1].mean(
        axis=1
    )  # (batch, T_y, T_x)
    state = steps.encode(source)
    for t in range(3):
        _, state = steps.step(target[:, t], state)
        np.testing.assert_allclose(
            ops.convert_to_numpy(state["attention"]), expected[:, t], atol=1e-6
        )


@pytest.mark.parametrize("normalize_first", [False, True])
def test_decoder_self_attention_weights_are_zero_above_the_diagonal(normalize_first):
    """Read on the model's own layers (checked to reproduce its logits), every layer and head."""
    model = tiny_model(normalize_first=normalize_first, dropout=0.1)
    source = source_batch()
    target = np.random.default_rng(2).integers(4, 25, size=(3, 7)).astype("int32")
    target[2, 5:] = 0  # trailing target padding
    encoder, decoder = model.get_layer(ENCODER), model.get_layer(DECODER)
    target_embedding = model.get_layer(TARGET_EMBEDDING)
    memory = encoder(model.get_layer(SOURCE_EMBEDDING)(source))  # Keras masks carried along
    hidden, scores = decoder(target_embedding(target), memory, return_attention_scores=True)
    logits = ops.convert_to_numpy(model({"source_ids": source, "target_ids": target}))
    np.testing.assert_allclose(
        ops.convert_to_numpy(target_embedding(hidden, reverse=True)), logits, atol=1e-5
    )
    weights = ops.convert_to_numpy(scores["self_attention"])  # (batch, layers, heads, T_y, T_y)
    assert weights.shape == (3, 2, 2, 7, 7)
    upper = np.triu(np.ones((7, 7), bool), k=1)
    assert np.all(weights[..., upper] == 0.0)
    real_keys = np.broadcast_to(~upper, weights.shape) & (target != 0)[:, None, None, None, :]
    assert np.all(weights[real_keys] > 0.0)  # the past and the present are all attended to
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(
        ops.convert_to_numpy(scores["cross_attention"])[1, ..., 4:] == 0.0
    )  # source padding


def test_state_shapes_are_fixed_across_steps():
    steps = TransformerTranslatorSteps(tiny_model(), max_length=5)
    state = steps.encode(source_batch())
    _, after = steps.step(np.full((3,), START, "int32"), state)
    shapes = keras.tree.map_structure(lambda x: tuple(x.shape), state)
    assert keras.tree.map_structure(lambda x: tuple(x.shape), after) == shapes
    assert shapes["cache"][0]["self_key"] == (3, 2, 5, 4)
    assert shapes["cache"][0]["cross_key"] == (3, 2, 6, 4)


@pytest.mark.tensorflow_only
def test_greedy_output_is_the_argmax_of_the_full_pass():
    model = tiny_model()
    steps = TransformerTranslatorSteps(model, max_length=6)
    source = source_batch()
    result = greedy_search(steps.step, steps.encode(source), 3, START, END, 6)
    ids = ops.convert_to_numpy(result.ids)
    for b in range(3):
        length = int(result.lengths[b])
        generated = list(ids[b, : min(length + 1, 6)])
        target = np.array([[START, *generated[:-1]]], "int32")
        logits = ops.convert_to_numpy(
            model({"source_ids": source[b : b + 1], "target_ids": target})
        )[0]
        masked = logits.copy()
        masked[:, [0, START]] = -np.inf
        np.testing.assert_array_equal(masked.argmax(-1), generated)
        log_probs = ops.convert_to_numpy(tf.nn.log_softmax(logits))
        expected = log_probs[np.arange(len(generated)), generated].sum()
        np.testing.assert_allclose(result.scores[b], expected, rtol=1e-4, atol=1e-4)


def test_beam_of_one_is_greedy():
    steps = TransformerTranslatorSteps(tiny_model(), max_length=8)
    state = steps.encode(source_batch())
    greedy = greedy_search(steps.step, state, 3, START, END, 8)
    beam = beam_search(steps.step, state, 3, START, END, 8, beam_size=1, length_penalty=0.6)
    np.testing.assert_array_equal(ops.convert_to_numpy(beam.ids), ops.convert_to_numpy(greedy.ids))
    np.testing.assert_array_equal(
        ops.convert_to_numpy(beam.lengths), ops.convert_to_numpy(greedy.lengths)
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(beam.scores), ops.convert_to_numpy(greedy.scores), rtol=1e-5
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(beam.alignments), ops.convert_to_numpy(greedy.alignments), atol=1e-6
    )


def test_shared_embeddings_tie_source_target_and_output():
    model = transformer_translator(
        20, 20, num_layers=1, d_model=8, num_heads=2, ff_dim=16, share_embeddings=True
    )
    embeddings = [w for w in model.weights if "token_embedding" in w.path]
    assert len(embeddings) == 1
    steps = TransformerTranslatorSteps(model, max_length=3)
    assert steps.source_embedding is steps.target_embedding
    with pytest.raises(ValueError, match="target_vocab_size=21"):
        transformer_translator(20, 21, share_embeddings=True)


def test_output_projection_is_the_target_embedding():
    model = tiny_model(num_layers=1)
    names = sorted(w.path for w in model.weights)
    assert not any("logits" in name for name in names)  # no separate output matrix
    embedding = ops.convert_to_numpy(model.get_layer("target_embedding").embeddings)
    hidden = np.random.default_rng(0).normal(size=(1, 2, 8)).astype("float32")
    logits = ops.convert_to_numpy(model.get_layer("target_embedding")(hidden, reverse=True))
    np.testing.assert_allclose(logits, hidden @ embedding.T, atol=1e-5)


def test_keras_round_trip_and_steps_after_reload(tmp_path):
    model = tiny_model(normalize_first=True)
    source, target = source_batch(), np.array([[START, 7, 8, 9]] * 3, "int32")
    inputs = {"source_ids": source, "target_ids": target}
    model.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(
        ops.convert_to_numpy(reloaded(inputs)), ops.convert_to_numpy(model(inputs)), atol=1e-6
    )
    first = greedy_search(
        TransformerTranslatorSteps(model, 5).step,
        TransformerTranslatorSteps(model, 5).encode(source),
        3,
        START,
        END,
        5,
    )
    steps = TransformerTranslatorSteps(reloaded, 5)
    second = greedy_search(steps.step, steps.encode(source), 3, START, END, 5)
    np.testing.assert_array_equal(ops.convert_to_numpy(first.ids), ops.convert_to_numpy(second.ids))


def test_padding_does_not_change_the_logits():
    model = tiny_model()
    source = source_batch()[1:2, :4]
    padded = np.concatenate([source, np.zeros((1, 3), "int32")], axis=1)
    target = np.array([[START, 5, 6]], "int32")
    padded_target = np.concatenate([target, np.zeros((1, 2), "int32")], axis=1)
    plain = ops.convert_to_numpy(model({"source_ids": source, "target_ids": target}))
    with_padding = ops.convert_to_numpy(model({"source_ids": padded, "target_ids": padded_target}))
    np.testing.assert_allclose(with_padding[:, :3], plain, atol=1e-5)


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="num_heads=3"):
        transformer_translator(10, 10, d_model=8, num_heads=3)
    with pytest.raises(ValueError, match="max_length=0"):
        TransformerTranslatorSteps(tiny_model(num_layers=1), max_length=0)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("policy, tolerance", [("mixed_float16", 1e-3), ("mixed_bfloat16", 1e-2)])
def test_mixed_precision_cached_steps_follow_the_full_pass(policy, tolerance):
    # Half-precision caches and activations: the cached and full passes round differently, so
    # they agree to about the half type's precision (float16 ~1e-3, bfloat16 ~1e-2 relative).
    keras.config.set_dtype_policy(policy)
    model = tiny_model()
    steps = TransformerTranslatorSteps(model, max_length=5)
    source = source_batch()
    target = np.array([[START, 5, 6, 7, 8]] * 3, "int32")
    full = ops.convert_to_numpy(model({"source_ids": source, "target_ids": target}))
    assert full.dtype == np.float32 and np.isfinite(full).all()
    state = steps.encode(source)
    assert state["cache"][0]["self_key"].dtype == keras.config.dtype_policy().compute_dtype
    for t in range(5):
        logits, state = steps.step(target[:, t], state)
        assert logits.dtype == tf.float32
        np.testing.assert_allclose(
            ops.convert_to_numpy(logits), full[:, t], atol=tolerance, rtol=tolerance
        )


@pytest.mark.tensorflow_only
def test_exported_graph_greedy_equals_eager_greedy():
    """The loop as the SavedModel traces it (batch and source length unknown) picks the tokens,
    scores and alignments of the eager loop."""
    model = tiny_model()
    steps = TransformerTranslatorSteps(model, max_length=6)
    source = source_batch()

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def decode(source_ids):
        result = greedy_search(
            steps.step, steps.encode(source_ids), tf.shape(source_ids)[0], START, END, 6
        )
        return result.ids, result.scores, result.alignments

    eager = greedy_search(steps.step, steps.encode(source), 3, START, END, 6)
    ids, scores, alignments = decode(tf.constant(source))
    np.testing.assert_array_equal(ops.convert_to_numpy(ids), ops.convert_to_numpy(eager.ids))
    np.testing.assert_allclose(
        ops.convert_to_numpy(scores), ops.convert_to_numpy(eager.scores), rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(alignments), ops.convert_to_numpy(eager.alignments), atol=1e-6
    )
