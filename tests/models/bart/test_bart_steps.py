import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.decoding import beam_search, greedy_search, sample
from keras_attn.models import BartSteps
from keras_attn.models.bart.model import bart, bart_translator
from tests.lazy_tf import tf

START, END = 2, 3
VOCAB, SOURCE_VOCAB = 30, 40
SETTINGS = dict(num_layers=2, d_model=16, num_heads=2, ff_dim=32, max_length=12, dropout=0.0)


def build(kind: str) -> keras.Model:
    if kind == "bart":
        return bart(VOCAB, **SETTINGS)
    return bart_translator(SOURCE_VOCAB, VOCAB, new_source_encoder_layers=1, **SETTINGS)


def source_batch(kind: str) -> np.ndarray:
    high = VOCAB if kind == "bart" else SOURCE_VOCAB
    source = np.random.default_rng(0).integers(4, high, size=(3, 6)).astype("int32")
    source[1, 4:] = 0
    return source


KINDS = ["bart", "new_source_encoder"]


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("kind", KINDS)
def test_cached_steps_equal_the_teacher_forced_pass(kind):
    model = build(kind)
    steps = BartSteps(model, max_length=8)
    source = source_batch(kind)
    target = np.random.default_rng(1).integers(4, VOCAB, size=(3, 8)).astype("int32")
    target[:, 0] = START
    full = ops.convert_to_numpy(model({"source_ids": source, "target_ids": target}))
    state = steps.encode(source)
    step = tf.function(steps.step)  # the graph the decoding loops run
    for t in range(8):
        logits, state = step(tf.constant(target[:, t]), state)
        assert logits.dtype == tf.float32 and logits.shape == (3, VOCAB)
        # float32 round-off of two evaluation orders of the same sums
        np.testing.assert_allclose(ops.convert_to_numpy(logits), full[:, t], atol=1e-5, rtol=1e-5)
        assert int(state["index"]) == t + 1
    attention = ops.convert_to_numpy(state["attention"])
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
    assert np.all(attention[1, 4:] == 0.0) and np.all(attention[1, :4] > 0.0)


def test_alignment_is_the_last_layers_cross_attention_averaged_over_heads():
    model = build("bart")
    steps = BartSteps(model, max_length=4)
    source = source_batch("bart")
    target = np.array([[START, 5, 6]] * 3, "int32")
    embedding = model.get_layer("embedding")
    memory = model.get_layer("encoder")(
        model.get_layer("encoder_embedding_norm")(embedding(source))
    )
    _, scores = model.get_layer("decoder")(
        model.get_layer("decoder_embedding_norm")(embedding(target)),
        memory,
        return_attention_scores=True,
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


def test_state_shapes_are_fixed_across_steps():
    steps = BartSteps(build("new_source_encoder"), max_length=5)
    state = steps.encode(source_batch("new_source_encoder"))
    _, after = steps.step(np.full((3,), START, "int32"), state)
    shapes = keras.tree.map_structure(lambda x: tuple(x.shape), state)
    assert keras.tree.map_structure(lambda x: tuple(x.shape), after) == shapes
    assert len(shapes["cache"]) == 2
    assert shapes["cache"][0]["self_key"] == (3, 2, 5, 8)
    assert shapes["cache"][0]["cross_key"] == (3, 2, 6, 8)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("kind", KINDS)
def test_greedy_output_is_the_argmax_chain_of_the_full_pass(kind):
    model = build(kind)
    steps = BartSteps(model, max_length=6)
    source = source_batch(kind)
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
        masked[:, [0, START]] = -np.inf  # greedy_search never emits PAD or START
        np.testing.assert_array_equal(masked.argmax(-1), generated)
        log_probs = ops.convert_to_numpy(tf.nn.log_softmax(logits))
        expected = log_probs[np.arange(len(generated)), generated].sum()
        np.testing.assert_allclose(
            ops.convert_to_numpy(result.scores)[b], expected, rtol=1e-4, atol=1e-4
        )


def teacher_forced_score(model, source_row, ids, length):
    """Sum of the full pass' log-probabilities of `ids[:length + 1]` (END included if fed)."""
    generated = list(ids[: min(length + 1, len(ids))])
    target = np.array([[START, *generated[:-1]]], "int32")
    logits = ops.convert_to_numpy(model({"source_ids": source_row[None], "target_ids": target}))[0]
    log_probs = ops.convert_to_numpy(tf.nn.log_softmax(logits))
    return log_probs[np.arange(len(generated)), generated].sum()


@pytest.mark.parametrize("kind", KINDS)
def test_beam_of_one_is_greedy_and_beam_scores_are_the_full_pass_scores(kind):
    model = build(kind)
    steps = BartSteps(model, max_length=7)
    source = source_batch(kind)
    state = steps.encode(source)
    greedy = greedy_search(steps.step, state, 3, START, END, 7)
    one = beam_search(steps.step, state, 3, START, END, 7, beam_size=1, length_penalty=0.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(one.ids), ops.convert_to_numpy(greedy.ids))
    np.testing.assert_allclose(
        ops.convert_to_numpy(one.scores), ops.convert_to_numpy(greedy.scores), rtol=1e-5
    )
    wide = beam_search(steps.step, state, 3, START, END, 7, beam_size=4, length_penalty=0.6)
    assert wide.ids.shape == (3, 7)
    for b in range(3):
        expected = teacher_forced_score(
            model, source[b], ops.convert_to_numpy(wide.ids)[b], int(wide.lengths[b])
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(wide.scores)[b], expected, rtol=1e-4, atol=1e-4
        )


def test_sampling_runs_through_the_view_and_is_seeded():
    steps = BartSteps(build("bart"), max_length=6)
    state = steps.encode(source_batch("bart"))
    first = sample(steps.step, state, 3, START, END, 6, temperature=1.0, seed=7)
    second = sample(steps.step, state, 3, START, END, 6, temperature=1.0, seed=7)
    assert first.ids.shape == (3, 6)
    np.testing.assert_array_equal(ops.convert_to_numpy(first.ids), ops.convert_to_numpy(second.ids))


def test_steps_after_a_keras_reload_decode_the_same(tmp_path):
    model = build("new_source_encoder")
    source = source_batch("new_source_encoder")
    model.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    results = []
    for candidate in (model, reloaded):
        steps = BartSteps(candidate, max_length=6)
        results.append(greedy_search(steps.step, steps.encode(source), 3, START, END, 6))
    np.testing.assert_array_equal(
        ops.convert_to_numpy(results[0].ids), ops.convert_to_numpy(results[1].ids)
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(results[0].scores), ops.convert_to_numpy(results[1].scores), atol=1e-6
    )


def test_rejects_a_cache_longer_than_the_positions():
    model = build("bart")
    with pytest.raises(ValueError, match="max_length=13"):
        BartSteps(model, max_length=13)
    with pytest.raises(ValueError, match="max_length=0"):
        BartSteps(model, max_length=0)


@pytest.mark.tensorflow_only
def test_a_bart_translator_exports_and_serves_what_it_translates(tmp_path):
    """The exported SavedModel passes the translator contract check and answers as in-process."""
    from keras_attn.export.saved_model import export_translator
    from keras_attn.export.translator import Translator
    from keras_attn.text.synthetic import generate_pairs
    from keras_attn.text.tokenizer import WordPieceTokenizer
    from keras_attn.text.vocab import build_wordpiece_vocab

    pairs = generate_pairs(200, seed=3)
    tokenizer = WordPieceTokenizer(build_wordpiece_vocab([s for pair in pairs for s in pair], 200))
    size = tokenizer.vocab_size
    model = bart_translator(size, size, **SETTINGS)
    translator = Translator(
        model,
        BartSteps(model, max_length=10),
        tokenizer,
        tokenizer,
        max_source_length=12,
        max_output_length=10,
        decoder="beam",
        beam_size=2,
    )
    texts = [pairs[0][0], pairs[1][0], ""]
    expected = translator.translate(tf.constant(texts))
    version = export_translator(translator, tmp_path / "models", check_sentences=texts)
    served = tf.saved_model.load(str(version)).signatures["translate"](text=tf.constant(texts))
    np.testing.assert_array_equal(
        ops.convert_to_numpy(served["tokens"]), ops.convert_to_numpy(expected["tokens"])
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(served["scores"]), ops.convert_to_numpy(expected["scores"]), atol=1e-5
    )


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("policy, tolerance", [("mixed_float16", 1e-3), ("mixed_bfloat16", 1e-2)])
def test_mixed_precision_cached_steps_follow_the_full_pass(policy, tolerance):
    # Half-precision caches and activations: the cached and full passes round differently, so
    # they agree to about the half type's precision (float16 ~1e-3, bfloat16 ~1e-2 relative).
    keras.config.set_dtype_policy(policy)
    model = build("new_source_encoder")
    steps = BartSteps(model, max_length=5)
    source = source_batch("new_source_encoder")
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
