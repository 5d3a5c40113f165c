import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.errors import ConfigError
from keras_attn.export.translator import Translator

START, END = 2, 3


@pytest.mark.parametrize("fixture", ["translator", "beam_translator"])
def test_outputs_are_consistent_with_a_teacher_forced_pass(fixture, request, tiny_pairs):
    translator = request.getfixturevalue(fixture)
    texts = [s for s, _ in tiny_pairs[:4]] + [""]
    out = translator.translate_with_alignment(tf.constant(texts))
    tokens, scores = out["tokens"].numpy(), out["scores"].numpy()
    alignment, source_tokens = out["alignment"].numpy(), out["source_tokens"].numpy()
    batch, width = tokens.shape
    assert batch == len(texts) and out["translation"].shape == (batch,)
    assert alignment.shape == (batch, width, source_tokens.shape[1])

    source_ids = translator._source_ids(tf.constant(texts)).numpy()
    vocab = translator.target_tokenizer.vocab
    for row in range(batch):
        words = [t.decode() for t in tokens[row] if t]
        assert all(t == b"" for t in tokens[row][len(words) :])  # padding only at the end
        ids = [vocab.index(w) for w in words]
        # Teacher-force START + ids (+ END if it fit) and recompute the sum of log-probabilities.
        generated = ids if len(ids) == translator.max_output_length else [*ids, END]
        target = np.array([[START, *generated[:-1]]])
        logits = translator.model({"source_ids": source_ids[row : row + 1], "target_ids": target})
        log_probs = tf.nn.log_softmax(logits).numpy()[0]
        expected = log_probs[np.arange(len(generated)), generated].sum()
        np.testing.assert_allclose(scores[row], expected, rtol=1e-4, atol=1e-4)
        real = source_tokens[row] != b""
        assert np.all(alignment[row, : len(words)][:, ~real] == 0.0)
        # The alignment rows are the attention of the steps that produced these very tokens.
        state = translator._steps.encode(source_ids[row : row + 1])
        for t, token in enumerate([START, *ids[:-1]] if ids else []):
            _, state = translator._steps.step(keras.ops.convert_to_tensor([token]), state)
            np.testing.assert_allclose(alignment[row, t], state["attention"][0], atol=1e-5)


def test_beam_of_one_translates_like_greedy(make_translator):
    texts = tf.constant(["el gato negro", "la casa", ""])
    greedy_translator = make_translator()
    keras.utils.set_random_seed(1234)  # the same initial weights
    beam_translator = make_translator(decoder="beam", beam_size=1)
    for a, b in zip(greedy_translator.model.weights, beam_translator.model.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    greedy = greedy_translator.translate_with_alignment(texts)
    beam = beam_translator.translate_with_alignment(texts)
    for name in ("translation", "tokens", "source_tokens"):
        np.testing.assert_array_equal(beam[name].numpy(), greedy[name].numpy())
    np.testing.assert_allclose(beam["scores"].numpy(), greedy["scores"].numpy(), rtol=1e-5)
    np.testing.assert_allclose(beam["alignment"].numpy(), greedy["alignment"].numpy(), atol=1e-6)


def test_rejects_unknown_decoder_and_bad_beam(make_translator):
    with pytest.raises(ValueError, match="decoder='sampling'"):
        make_translator(decoder="sampling")
    with pytest.raises(ValueError, match="beam_size=0"):
        make_translator(decoder="beam", beam_size=0)


def test_length_limit(translator):
    out = translator.translate(tf.constant(["el gato"] * 2))
    assert out["tokens"].shape[1] <= translator.max_output_length


def test_translation_is_detokenized_tokens(translator, tiny_pairs):
    out = translator.translate(tf.constant([tiny_pairs[0][0]]))
    ids = [
        translator.target_tokenizer.vocab.index(t.decode()) for t in out["tokens"].numpy()[0] if t
    ]
    expected = translator.target_tokenizer.detokenize(tf.constant([ids or [0]], tf.int64))
    assert out["translation"].numpy()[0] == expected.numpy()[0]


class WithoutAttention:
    """The step view of `steps` without its "attention" entry."""

    def __init__(self, steps):
        self.steps = steps

    def encode(self, source_ids):
        return {k: v for k, v in self.steps.encode(source_ids).items() if k != "attention"}

    def step(self, token_ids, state):
        logits, state = self.steps.step(token_ids, {**state, "attention": 0.0})
        return logits, {k: v for k, v in state.items() if k != "attention"}


def test_a_step_view_without_attention_translates_without_alignments(translator):
    plain = Translator(
        translator.model,
        WithoutAttention(translator._steps),
        translator.source_tokenizer,
        translator.target_tokenizer,
        max_output_length=translator.max_output_length,
    )
    assert translator.with_alignment and not plain.with_alignment
    texts = tf.constant(["el gato negro", ""])
    for name, value in translator.translate(texts).items():
        np.testing.assert_array_equal(plain.translate(texts)[name].numpy(), value.numpy())
    with pytest.raises(ConfigError, match="needs a step view whose state has an 'attention'"):
        plain.translate_with_alignment(texts)
