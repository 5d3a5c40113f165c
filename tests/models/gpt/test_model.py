import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.decoding import beam_search, greedy_search
from keras_attn.models import GPTSteps, gpt, gpt_classifier
from keras_attn.models.gpt.model import DECODER, EMBEDDING
from tests.lazy_tf import tf

START, END, VOCAB = 2, 3, 24


def tiny_gpt(**kwargs):
    settings = dict(num_layers=2, d_model=8, num_heads=2, ff_dim=16, max_length=16, dropout=0.0)
    settings.update(kwargs)
    return gpt(VOCAB, **settings)


PROMPTS = np.array([[5, 6, 7, 8], [9, 10, 0, 0], [11, 0, 0, 0]], "int32")


def test_no_position_sees_the_future():
    model = tiny_gpt()
    ids = np.random.default_rng(0).integers(4, VOCAB, size=(2, 7)).astype("int32")
    base = ops.convert_to_numpy(model(ids))
    for k in range(7):
        changed = ids.copy()
        changed[:, k] = 4 + (changed[:, k] - 3) % (VOCAB - 4)  # another real token
        out = ops.convert_to_numpy(model(changed))
        np.testing.assert_allclose(out[:, :k], base[:, :k], atol=1e-6)
        assert np.abs(out[:, k:] - base[:, k:]).max(axis=-1).min() > 1e-4


def test_attention_weights_are_zero_above_the_diagonal():
    """Read on the model's own layers (checked to reproduce its logits), every layer and head."""
    model = tiny_gpt(dropout=0.1)
    ids = np.random.default_rng(3).integers(4, VOCAB, size=(2, 7)).astype("int32")
    ids[1, 5:] = 0  # trailing padding
    embedding, decoder = model.get_layer(EMBEDDING), model.get_layer(DECODER)
    hidden, scores = decoder(embedding(ids), return_attention_scores=True)  # Keras mask carried
    np.testing.assert_allclose(
        ops.convert_to_numpy(embedding(hidden, reverse=True)),
        ops.convert_to_numpy(model(ids)),
        atol=1e-5,
    )
    weights = ops.convert_to_numpy(scores["self_attention"])  # (batch, layers, heads, T, T)
    assert weights.shape == (2, 2, 2, 7, 7) and set(scores) == {"self_attention"}
    upper = np.triu(np.ones((7, 7), bool), k=1)
    assert np.all(weights[..., upper] == 0.0)
    real_keys = np.broadcast_to(~upper, weights.shape) & (ids != 0)[:, None, None, None, :]
    assert np.all(weights[real_keys] > 0.0)  # the past and the present are all attended to
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_trailing_padding_changes_nothing():
    model = tiny_gpt()
    ids = np.array([[5, 6, 7]], "int32")
    padded = np.array([[5, 6, 7, 0, 0]], "int32")
    np.testing.assert_allclose(
        ops.convert_to_numpy(model(padded))[:, :3], ops.convert_to_numpy(model(ids)), atol=1e-6
    )


@pytest.mark.tensorflow_only
def test_prefill_and_cached_steps_equal_the_full_pass():
    model = tiny_gpt()
    steps = GPTSteps(model, max_length=12)
    rng = np.random.default_rng(1)
    continuation = rng.integers(4, VOCAB, size=(3, 5)).astype("int32")
    step = tf.function(steps.step)
    state = steps.prefill(PROMPTS)
    # First step: the prompt's next-token logits (the START fed here is never attended to).
    logits, state = step(tf.fill([3], START), state)
    collected = [ops.convert_to_numpy(logits)]
    for t in range(4):
        logits, state = step(tf.constant(continuation[:, t]), state)
        collected.append(ops.convert_to_numpy(logits))
    for row, prompt in enumerate(PROMPTS):
        real = prompt[prompt != 0]
        sequence = np.concatenate([real, continuation[row, :4]])[None]
        full = ops.convert_to_numpy(model(sequence))[
            0, len(real) - 1 :
        ]  # logits after each fed token
        np.testing.assert_allclose(np.stack(collected)[:, row], full, atol=1e-5, rtol=1e-5)


def test_greedy_generation_continues_each_prompt_like_the_full_pass():
    model = tiny_gpt()
    steps = GPTSteps(model, max_length=12)
    result = greedy_search(steps.step, steps.prefill(PROMPTS), 3, START, END, 8)
    for row, prompt in enumerate(PROMPTS):
        real = list(prompt[prompt != 0])
        length = int(result.lengths[row])
        generated = list(ops.convert_to_numpy(result.ids)[row, : min(length + 1, 8)])
        logits = ops.convert_to_numpy(model(np.array([real + generated[:-1]])))[0, len(real) - 1 :]
        logits[:, [0, START]] = -np.inf
        np.testing.assert_array_equal(logits.argmax(-1), generated)


def test_beam_of_one_is_greedy():
    steps = GPTSteps(tiny_gpt(), max_length=12)
    state = steps.prefill(PROMPTS)
    greedy = greedy_search(steps.step, state, 3, START, END, 8)
    beam = beam_search(steps.step, state, 3, START, END, 8, beam_size=1)
    np.testing.assert_array_equal(ops.convert_to_numpy(beam.ids), ops.convert_to_numpy(greedy.ids))
    np.testing.assert_allclose(
        ops.convert_to_numpy(beam.scores), ops.convert_to_numpy(greedy.scores), rtol=1e-5
    )


def test_tied_output_and_keras_round_trip(tmp_path):
    model = tiny_gpt(num_layers=1)
    assert len([w for w in model.weights if "embeddings" in w.path]) == 2  # tokens, positions
    hidden = np.random.default_rng(0).normal(size=(1, 2, 8)).astype("float32")
    embedding = model.get_layer("embedding")
    np.testing.assert_allclose(
        ops.convert_to_numpy(embedding(hidden, reverse=True)),
        hidden @ ops.convert_to_numpy(embedding.embeddings).T,
        atol=1e-5,
    )
    model.save(tmp_path / "gpt.keras")
    reloaded = keras.saving.load_model(tmp_path / "gpt.keras")
    np.testing.assert_allclose(
        ops.convert_to_numpy(reloaded(PROMPTS)), ops.convert_to_numpy(model(PROMPTS)), atol=1e-6
    )
    results = []
    for candidate in (model, reloaded):
        steps = GPTSteps(candidate, 12)
        results.append(greedy_search(steps.step, steps.prefill(PROMPTS), 3, START, END, 6))
    first, second = results
    np.testing.assert_array_equal(ops.convert_to_numpy(first.ids), ops.convert_to_numpy(second.ids))


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="max_length=17"):
        GPTSteps(tiny_gpt(num_layers=1), max_length=17)
    with pytest.raises(ValueError, match="num_heads=3"):
        gpt(10, d_model=8, num_heads=3)


# Right-padded rows of lengths 6, 3, 1 and 5 (START first, END last, as the LM's sequences).
CLASSIFY = np.array(
    [
        [START, 5, 6, 7, 8, END],
        [START, 9, END, 0, 0, 0],
        [START, 0, 0, 0, 0, 0],
        [START, 10, 11, 12, END, 0],
    ],
    "int32",
)


def test_classifier_reads_the_last_real_token():
    backbone = tiny_gpt()
    classifier = gpt_classifier(backbone, 3, dropout=0.0)
    logits = classifier(CLASSIFY)
    assert logits.shape == (4, 3) and keras.backend.standardize_dtype(logits.dtype) == "float32"
    for name in (EMBEDDING, DECODER):
        assert classifier.get_layer(name) is backbone.get_layer(name)
    hidden = ops.convert_to_numpy(
        backbone.get_layer(DECODER)(backbone.get_layer(EMBEDDING)(CLASSIFY))
    )
    last = hidden[np.arange(4), [5, 2, 0, 4]]  # the last non-zero id of each row
    dense = classifier.get_layer("classifier")
    expected = last @ ops.convert_to_numpy(dense.kernel) + ops.convert_to_numpy(dense.bias)
    np.testing.assert_allclose(ops.convert_to_numpy(logits), expected, atol=1e-5)
    # The decoder's hidden states feed the LM's tied logits: it is the backbone's final state.
    np.testing.assert_allclose(
        ops.convert_to_numpy(backbone.get_layer(EMBEDDING)(hidden, reverse=True)),
        ops.convert_to_numpy(backbone(CLASSIFY)),
        atol=1e-5,
    )


def test_padding_after_the_last_token_changes_no_classifier_logit():
    classifier = gpt_classifier(tiny_gpt(), 3, dropout=0.0)
    batched = ops.convert_to_numpy(classifier(CLASSIFY))
    longer = ops.convert_to_numpy(classifier(np.pad(CLASSIFY, ((0, 0), (0, 4)))))
    np.testing.assert_allclose(longer, batched, atol=1e-5)
    for row, ids in enumerate(CLASSIFY):
        alone = ops.convert_to_numpy(classifier(ids[ids != 0][None]))[0]
        np.testing.assert_allclose(alone, batched[row], atol=1e-5)
    # A changed last token changes the logits: it is read, not an earlier position.
    changed = CLASSIFY.copy()
    changed[1, 2] = 13
    assert np.abs(ops.convert_to_numpy(classifier(changed))[1] - batched[1]).max() > 1e-4


def test_classifier_round_trip_and_training(tmp_path):
    """15 epochs fit four sequences: final / first loss <= 0.03 over 4 seeds; bound 0.2."""
    keras.utils.set_random_seed(0)
    classifier = gpt_classifier(tiny_gpt(), 2)
    classifier.save(tmp_path / "classifier.keras")
    reloaded = keras.saving.load_model(tmp_path / "classifier.keras")
    np.testing.assert_allclose(
        ops.convert_to_numpy(reloaded(CLASSIFY)),
        ops.convert_to_numpy(classifier(CLASSIFY)),
        atol=1e-6,
    )
    classifier.compile(
        keras.optimizers.Adam(1e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    labels = np.array([0, 1, 0, 1])
    history = classifier.fit(CLASSIFY, labels, epochs=15, batch_size=4, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.2 * losses[0], losses


def test_classifier_rejects_bad_num_classes():
    with pytest.raises(ValueError, match="num_classes=0"):
        gpt_classifier(tiny_gpt(num_layers=1), 0)
