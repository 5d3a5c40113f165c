import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.decoding import beam_search, greedy_search
from keras_attn.models import BertSumSteps
from keras_attn.models.bert.bertsum import BERTSUM_ENCODER_LAYERS, bertsum_translator
from keras_attn.models.bert.model import bert
from tests.lazy_tf import tf

START, END = 2, 3
SOURCE_VOCAB, TARGET_VOCAB = 40, 30
SETTINGS = dict(num_layers=2, d_model=16, num_heads=2, ff_dim=32, max_length=12, dropout=0.0)


def tiny(**kwargs):
    return bertsum_translator(SOURCE_VOCAB, TARGET_VOCAB, **dict(SETTINGS, **kwargs))


def source_batch():
    source = np.random.default_rng(0).integers(4, SOURCE_VOCAB, size=(3, 6)).astype("int32")
    source[1, 4:] = 0
    return source


def encoder_part(model):
    return {
        w.path: tuple(w.shape)
        for w in model.weights
        if w.path.split("/")[0] in BERTSUM_ENCODER_LAYERS
    }


@pytest.mark.parametrize("num_segments", [0, 2])
def test_encoder_is_berts_encoder_with_the_same_names_and_outputs(num_segments):
    pretrained = bert(SOURCE_VOCAB, num_segments=num_segments, **SETTINGS)
    model = tiny(num_segments=num_segments, decoder_layers=1)
    berts = {w.path: tuple(w.shape) for w in pretrained.weights if not w.path.startswith("mlm_")}
    assert encoder_part(model) == berts
    assert ("segment_embedding/embeddings" in berts) == (num_segments > 0)
    # The other weights are the decoder's, under names that do not clash with BERT's.
    others = {w.path.split("/")[0] for w in model.weights} - set(BERTSUM_ENCODER_LAYERS)
    assert others == {"decoder_embedding", "decoder"}
    # Loaded by name, the encoder computes BERT's sequence output (all tokens in segment 0).
    values = {w.path: w for w in pretrained.weights}
    for weight in model.weights:
        if weight.path in values:
            weight.assign(values[weight.path])
    source = source_batch()
    inputs = {"token_ids": source, "segment_ids": np.zeros_like(source)}
    expected = ops.convert_to_numpy(
        pretrained(inputs if num_segments else source)["sequence_output"]
    )
    memory = keras.Model(model.input, model.get_layer("encoder").output)
    target = np.full((3, 1), START, "int32")
    got = ops.convert_to_numpy(memory({"source_ids": source, "target_ids": target}))
    real = source != 0
    np.testing.assert_allclose(got[real], expected[real], atol=1e-5)


def test_decoder_has_its_own_tied_vocabulary_and_depth():
    model = tiny(decoder_layers=3)
    embedding = model.get_layer("decoder_embedding")
    assert embedding.embeddings.shape == (TARGET_VOCAB, 16)
    assert model.get_layer("decoder").num_layers == 3 and model.get_layer("encoder").num_layers == 2
    assert not any(w.path.startswith("logits") for w in model.weights)  # tied output
    hidden = np.random.default_rng(0).normal(size=(1, 2, 16)).astype("float32")
    np.testing.assert_allclose(
        ops.convert_to_numpy(embedding(hidden, reverse=True)),
        hidden @ ops.convert_to_numpy(embedding.embeddings).T,
        atol=1e-5,
    )
    logits = model({"source_ids": source_batch(), "target_ids": np.full((3, 4), START, "int32")})
    assert (
        logits.shape == (3, 4, TARGET_VOCAB)
        and keras.backend.standardize_dtype(logits.dtype) == "float32"
    )


def test_padding_and_causality():
    model = tiny()
    source, target = source_batch(), np.array([[START, 5, 6, 7]] * 3, "int32")
    base = ops.convert_to_numpy(model({"source_ids": source, "target_ids": target}))
    short = ops.convert_to_numpy(
        model({"source_ids": source[1:2, :4], "target_ids": target[1:2, :2]})
    )
    np.testing.assert_allclose(short, base[1:2, :2], atol=1e-5)
    changed = target.copy()
    changed[:, 3] = 9
    out = ops.convert_to_numpy(model({"source_ids": source, "target_ids": changed}))
    np.testing.assert_allclose(out[:, :3], base[:, :3], atol=1e-6)
    assert np.abs(out[:, 3] - base[:, 3]).max() > 1e-4


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("num_segments", [0, 2])
def test_cached_steps_equal_the_teacher_forced_pass(num_segments):
    model = tiny(num_segments=num_segments, decoder_layers=3)
    steps = BertSumSteps(model, max_length=8)
    source = source_batch()
    target = np.random.default_rng(1).integers(4, TARGET_VOCAB, size=(3, 8)).astype("int32")
    target[:, 0] = START
    full = ops.convert_to_numpy(model({"source_ids": source, "target_ids": target}))
    state = steps.encode(source)
    step = tf.function(steps.step)
    for t in range(8):
        logits, state = step(tf.constant(target[:, t]), state)
        assert logits.dtype == tf.float32 and logits.shape == (3, TARGET_VOCAB)
        # float32 round-off of two evaluation orders of the same sums
        np.testing.assert_allclose(ops.convert_to_numpy(logits), full[:, t], atol=1e-5, rtol=1e-5)
    assert len(state["cache"]) == 3 and state["cache"][0]["self_key"].shape == (3, 2, 8, 8)
    attention = ops.convert_to_numpy(state["attention"])
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
    assert np.all(attention[1, 4:] == 0.0)


def teacher_forced_score(model, source_row, ids, length):
    """Sum of the full pass' log-probabilities of `ids[:length + 1]` (END included if fed)."""
    generated = list(ids[: min(length + 1, len(ids))])
    target = np.array([[START, *generated[:-1]]], "int32")
    logits = ops.convert_to_numpy(model({"source_ids": source_row[None], "target_ids": target}))[0]
    log_probs = ops.convert_to_numpy(tf.nn.log_softmax(logits))
    return generated, logits, log_probs[np.arange(len(generated)), generated].sum()


def test_greedy_is_the_argmax_chain_and_beam_scores_are_full_pass_scores():
    model = tiny()
    steps = BertSumSteps(model, max_length=6)
    source = source_batch()
    state = steps.encode(source)
    greedy = greedy_search(steps.step, state, 3, START, END, 6)
    beam = beam_search(steps.step, state, 3, START, END, 6, beam_size=3, length_penalty=0.6)
    one = beam_search(steps.step, state, 3, START, END, 6, beam_size=1, length_penalty=0.6)
    np.testing.assert_array_equal(ops.convert_to_numpy(one.ids), ops.convert_to_numpy(greedy.ids))
    for b in range(3):
        generated, logits, score = teacher_forced_score(
            model, source[b], ops.convert_to_numpy(greedy.ids)[b], int(greedy.lengths[b])
        )
        logits[:, [0, START]] = -np.inf  # greedy_search never emits PAD or START
        np.testing.assert_array_equal(logits.argmax(-1), generated)
        np.testing.assert_allclose(
            ops.convert_to_numpy(greedy.scores)[b], score, rtol=1e-4, atol=1e-4
        )
        _, _, score = teacher_forced_score(
            model, source[b], ops.convert_to_numpy(beam.ids)[b], int(beam.lengths[b])
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(beam.scores)[b], score, rtol=1e-4, atol=1e-4
        )


def test_keras_round_trip_and_steps_after_reload(tmp_path):
    model = tiny(num_segments=2)
    source = source_batch()
    inputs = {"source_ids": source, "target_ids": np.array([[START, 7, 8]] * 3, "int32")}
    model.save(tmp_path / "bertsum.keras")
    reloaded = keras.saving.load_model(tmp_path / "bertsum.keras")
    np.testing.assert_allclose(
        ops.convert_to_numpy(reloaded(inputs)), ops.convert_to_numpy(model(inputs)), atol=1e-6
    )
    results = []
    for candidate in (model, reloaded):
        steps = BertSumSteps(candidate, max_length=5)
        results.append(greedy_search(steps.step, steps.encode(source), 3, START, END, 5))
    np.testing.assert_array_equal(
        ops.convert_to_numpy(results[0].ids), ops.convert_to_numpy(results[1].ids)
    )


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="decoder_layers=0"):
        tiny(decoder_layers=0)
    with pytest.raises(ValueError, match="num_segments=-1"):
        tiny(num_segments=-1)
    with pytest.raises(ValueError, match="num_heads=3"):
        tiny(num_heads=3)
    with pytest.raises(ValueError, match="max_length=0"):
        BertSumSteps(tiny(), max_length=0)


@pytest.mark.tensorflow_only
def test_mixed_float16_cached_steps_follow_the_full_pass():
    # Half-precision caches and activations round differently in the two passes (~1e-3).
    keras.config.set_dtype_policy("mixed_float16")
    model = tiny(num_segments=2)
    steps = BertSumSteps(model, max_length=4)
    source, target = source_batch(), np.array([[START, 5, 6, 7]] * 3, "int32")
    full = ops.convert_to_numpy(model({"source_ids": source, "target_ids": target}))
    assert full.dtype == np.float32 and np.isfinite(full).all()
    state = steps.encode(source)
    assert keras.backend.standardize_dtype(state["cache"][0]["self_key"].dtype) == "float16"
    for t in range(4):
        logits, state = steps.step(target[:, t], state)
        assert logits.dtype == tf.float32
        np.testing.assert_allclose(ops.convert_to_numpy(logits), full[:, t], atol=1e-3, rtol=1e-3)
