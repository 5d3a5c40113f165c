"""`PrefixSteps`: any Keras translator or language model decoded
one token at a time, and exported without a step view of its own."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.errors import ConfigError
from keras_attn.export import (
    PrefixSteps,
    export_generator,
    export_translator,
)
from keras_attn.export.generator import Generator
from keras_attn.export.translator import Translator
from keras_attn.layers import BahdanauDecoder, BidirectionalEncoder
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import RESERVED_TOKENS, save_vocab

WORDS = "red green blue cat dog sun moon tree car house big small one two three four".split()
VOCAB = RESERVED_TOKENS + WORDS  # 20 tokens, source and target alike
V = len(VOCAB)
START, END = 2, 3
MAX_OUTPUT_LENGTH = 7
SENTENCES = ["red cat", "big blue house one two", "sun", ""]
SOURCE_IDS = tf.constant([[5, 8, 9, 0], [14, 15, 0, 0]])
TARGET_IDS = tf.constant([[START, 6, 7, 8, 4, 19], [START, 9, 9, 10, 3, 0]])


def functional_translator(dtype="int32", names=("source_ids", "target_ids"), softmax=False):
    """The README's translator, tiny: a BiLSTM encoder and a Bahdanau-attention decoder."""
    keras.utils.set_random_seed(7)
    source = keras.Input((None,), dtype=dtype, name=names[0])
    target = keras.Input((None,), dtype=dtype, name=names[1])
    memory, h, c = BidirectionalEncoder(8)(keras.layers.Embedding(V, 8, mask_zero=True)(source))
    decoded = BahdanauDecoder(16, score="additive")(
        keras.layers.Embedding(V, 8, mask_zero=True)(target), memory, initial_state=[h, c]
    )
    scores = keras.layers.Dense(V, activation="softmax" if softmax else None)(decoded)
    return source, target, scores


@pytest.fixture(scope="module")
def model():
    source, target, scores = functional_translator()
    return keras.Model([source, target], scores)


def step_through(steps, source_ids, target_ids):
    """The step view's scores `(batch, T_y, V)`, fed `target_ids` one column at a time."""
    state = steps.encode(source_ids)
    columns = []
    for t in range(target_ids.shape[1]):
        logits, state = steps.step(target_ids[:, t], state)
        assert logits.dtype == tf.float32
        assert state["positions"].numpy().tolist() == [t + 1] * target_ids.shape[0]
        columns.append(logits.numpy())
    return np.stack(columns, axis=1)


def test_step_logits_equal_the_teacher_forced_logits(model):
    steps = PrefixSteps(model, max_length=MAX_OUTPUT_LENGTH)
    assert (steps.outputs, steps.vocab_size) == ("logits", V)
    expected = model([SOURCE_IDS, TARGET_IDS]).numpy()
    np.testing.assert_allclose(step_through(steps, SOURCE_IDS, TARGET_IDS), expected, atol=1e-5)
    state = steps.encode(SOURCE_IDS)
    assert state["token_ids"].shape == (2, MAX_OUTPUT_LENGTH) and "attention" not in state
    assert state["token_ids"].numpy().tolist() == [[START] + [0] * (MAX_OUTPUT_LENGTH - 1)] * 2


def test_int64_inputs_taken_by_name_in_any_order():
    source, target, scores = functional_translator("int64", names=("src", "tgt"))
    by_list = keras.Model([target, source], scores)  # the target comes first
    by_dict = keras.Model({"tgt": target, "src": source}, scores)
    expected = by_list([tf.cast(TARGET_IDS, "int64"), tf.cast(SOURCE_IDS, "int64")]).numpy()
    for model, arguments in [
        (by_list, dict(source_input="src", target_input="tgt")),
        (by_list, dict(source_input=1, target_input=0)),
        (by_dict, dict(source_input="src", target_input="tgt")),
    ]:
        steps = PrefixSteps(model, max_length=MAX_OUTPUT_LENGTH, **arguments)
        got = step_through(steps, SOURCE_IDS, TARGET_IDS)
        np.testing.assert_allclose(got, expected, atol=1e-5)
    with pytest.raises(ConfigError, match=r"source_input to be one of the model's inputs"):
        PrefixSteps(by_list, MAX_OUTPUT_LENGTH, source_input="source_ids")


def test_a_final_softmax_is_detected_and_its_log_returned():
    source, target, probabilities = functional_translator(softmax=True)
    model = keras.Model([source, target], probabilities)
    steps = PrefixSteps(model, max_length=MAX_OUTPUT_LENGTH)
    assert steps.outputs == "probabilities"
    expected = np.log(model([SOURCE_IDS, TARGET_IDS]).numpy())
    np.testing.assert_allclose(step_through(steps, SOURCE_IDS, TARGET_IDS), expected, atol=1e-5)
    stated = PrefixSteps(model, max_length=MAX_OUTPUT_LENGTH, outputs="logits")
    assert stated.outputs == "logits"
    with pytest.raises(ConfigError, match="outputs='softmax'"):
        PrefixSteps(model, MAX_OUTPUT_LENGTH, outputs="softmax")


def test_a_model_reading_later_target_tokens_is_refused():
    source = keras.Input((None,), dtype="int32", name="source_ids")
    target = keras.Input((None,), dtype="int32", name="target_ids")
    embedded = keras.layers.Embedding(V, 8)(target)
    decoded = keras.layers.Bidirectional(keras.layers.LSTM(8, return_sequences=True))(embedded)
    context = keras.ops.mean(keras.layers.Embedding(V, 16)(source), axis=1, keepdims=True)
    model = keras.Model([source, target], keras.layers.Dense(V)(decoded + context))
    with pytest.raises(ConfigError) as refused:
        PrefixSteps(model, MAX_OUTPUT_LENGTH)
    message = str(refused.value)
    assert message.startswith("the model reads later target tokens: its scores at target ")
    assert "position 0 change when only the tokens after position 0 change" in message
    assert "bidirectional" in message and "\n" not in message


class PeekAhead(keras.layers.Layer):
    """Adds the next position's vector to every position from 2 on: causal up to position 1."""

    def call(self, x):
        ahead = keras.ops.pad(x[:, 1:], [[0, 0], [0, 1], [0, 0]])  # (batch, T, d): x[:, t + 1]
        keep = keras.ops.cast(keras.ops.arange(keras.ops.shape(x)[1]) >= 2, x.dtype)
        return x + ahead * keep[None, :, None]


def test_a_decoder_that_peeks_one_token_ahead_is_refused_at_that_position():
    source = keras.Input((None,), dtype="int32", name="source_ids")
    target = keras.Input((None,), dtype="int32", name="target_ids")
    mixed = PeekAhead()(keras.layers.Embedding(V, 8)(target))
    model = keras.Model([source, target], keras.layers.Dense(V)(mixed))
    with pytest.raises(ConfigError, match="scores at target position 2 change when only the "):
        PrefixSteps(model, MAX_OUTPUT_LENGTH)


def test_a_keras_hub_translator_saved_and_reloaded_steps_like_its_teacher_forced_pass(tmp_path):
    keras_hub = pytest.importorskip("keras_hub")
    source = keras.Input((None,), dtype="int32", name="source_ids")
    target = keras.Input((None,), dtype="int32", name="target_ids")
    embed = keras_hub.layers.TokenAndPositionEmbedding(V, 16, 8, mask_zero=True)
    memory = keras_hub.layers.TransformerEncoder(16, 2)(embed(source))
    target_embed = keras_hub.layers.TokenAndPositionEmbedding(V, 16, 8, mask_zero=True)
    decoded = keras_hub.layers.TransformerDecoder(16, 2)(target_embed(target), memory)
    keras.Model([source, target], keras.layers.Dense(V)(decoded)).save(tmp_path / "hub.keras")
    model = keras.saving.load_model(tmp_path / "hub.keras")  # keras_hub is imported
    steps = PrefixSteps(model, max_length=MAX_OUTPUT_LENGTH)  # causal: its decoder masks ahead
    expected = model([SOURCE_IDS, TARGET_IDS]).numpy()
    np.testing.assert_allclose(step_through(steps, SOURCE_IDS, TARGET_IDS), expected, atol=1e-5)


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    save_vocab(path, VOCAB)
    return path


def in_process(model, **kwargs):
    tokenizer = WordPieceTokenizer(VOCAB)
    steps = PrefixSteps(model, MAX_OUTPUT_LENGTH)
    return Translator(
        model, steps, tokenizer, tokenizer, max_output_length=MAX_OUTPUT_LENGTH, **kwargs
    )


def assert_same_outputs(got, want):
    assert set(got) == set(want) == {"translation", "tokens", "scores"}
    for name, value in want.items():
        if value.dtype == tf.float32:
            np.testing.assert_allclose(got[name].numpy(), value.numpy(), rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(got[name].numpy(), value.numpy())


@pytest.mark.parametrize(
    "decoder", [dict(decoder="greedy"), dict(decoder="beam", beam_size=3, length_penalty=0.8)]
)
def test_exports_decode_like_the_in_process_translator(model, vocab_file, tmp_path, decoder):
    # One vocabulary as a token list, the other as a file. The beam export runs the contract
    # check, which accepts a model without alignments.
    checked = decoder["decoder"] == "beam"
    version = export_translator(
        model,
        VOCAB,
        vocab_file,
        tmp_path,
        max_output_length=MAX_OUTPUT_LENGTH,
        check=checked,
        warmup_texts=None if not checked else ("red cat", ""),
        **decoder,
    )
    loaded = tf.saved_model.load(str(version))
    assert set(loaded.signatures) == {"serving_default", "translate"}
    translator = in_process(model, **decoder)
    assert not translator.with_alignment
    want = translator.translate(tf.constant(SENTENCES))
    for signature in ("serving_default", "translate"):
        assert_same_outputs(loaded.signatures[signature](text=tf.constant(SENTENCES)), want)
    if decoder["decoder"] == "greedy":  # the scores are the model's own, teacher-forced
        tokens = want["tokens"].numpy()
        source_ids = translator._source_ids(tf.constant(SENTENCES))
        for row, words in enumerate(tokens):
            ids = [VOCAB.index(w.decode()) for w in words if w]
            generated = ids if len(ids) == MAX_OUTPUT_LENGTH else [*ids, END]
            target = tf.constant([[START, *generated[:-1]]])
            log_probs = tf.nn.log_softmax(model([source_ids[row : row + 1], target]))[0]
            expected = log_probs.numpy()[np.arange(len(generated)), generated].sum()
            assert want["scores"].numpy()[row] == pytest.approx(expected, abs=1e-4)


def test_a_compiled_export_decodes_like_the_uncompiled_translator(model, tmp_path):
    buckets = dict(batch_buckets=(4,), length_buckets=(8,))
    version = export_translator(
        model,
        VOCAB,
        VOCAB,
        tmp_path,
        decoder="beam",
        beam_size=2,
        jit_compile=True,
        max_source_length=8,
        max_output_length=MAX_OUTPUT_LENGTH,
        check=False,
        warmup_texts=None,
        **buckets,
    )
    loaded = tf.saved_model.load(str(version))
    want = in_process(model, decoder="beam", beam_size=2, max_source_length=8)
    assert_same_outputs(
        loaded.signatures["translate"](text=tf.constant(SENTENCES)),
        want.translate(tf.constant(SENTENCES)),
    )


def test_export_mistakes_are_config_errors(model, tmp_path):
    with pytest.raises(ConfigError, match=r"target_vocabulary to start with the reserved tokens"):
        export_translator(model, VOCAB, WORDS, tmp_path)
    with pytest.raises(ConfigError, match="the model scores 20 tokens, but target_vocabulary"):
        export_translator(model, VOCAB, [*VOCAB, "extra"], tmp_path)
    with pytest.raises(FileNotFoundError, match="source_vocabulary='.*' is not a vocabulary"):
        export_translator(model, tmp_path / "missing.txt", VOCAB, tmp_path)
    with pytest.raises(ConfigError, match="outputs only apply to the generic step view"):
        export_translator(model, VOCAB, VOCAB, tmp_path, steps=object(), outputs="logits")
    with pytest.raises(ConfigError, match="Translator or a keras.Model"):
        export_translator("model.keras", tmp_path)
    assert list(tmp_path.iterdir()) == []


# Language models: token ids to next-token scores, exported as a generator.


@pytest.fixture(scope="module")
def language_model():
    keras.utils.set_random_seed(11)
    tokens = keras.Input((None,), dtype="int64", name="tokens")
    hidden = keras.layers.LSTM(16, return_sequences=True)(keras.layers.Embedding(V, 8)(tokens))
    return keras.Model(tokens, keras.layers.Dense(V)(hidden))


def test_language_model_steps_continue_each_prompt_like_a_teacher_forced_pass(language_model):
    steps = PrefixSteps(language_model, max_length=9, language_model=True)
    assert (steps.outputs, steps.vocab_size) == ("logits", V)
    prompts = [[START, 5, 6, 7], [START, 8, 0, 0]]
    state = steps.prefill(tf.constant(prompts))
    continuations = [[9, 10, 11], [12, 13, 14]]
    fed = [[START, START]] + [[row[t] for row in continuations] for t in range(2)]
    for t, tokens in enumerate(fed):
        logits, state = steps.step(tf.constant(tokens), state)
        for row, prompt in enumerate(prompts):
            prefix = [i for i in prompt if i] + continuations[row][:t]
            full = language_model(tf.constant([prefix], tf.int64)).numpy()[0, -1]
            np.testing.assert_allclose(logits.numpy()[row], full, atol=1e-5)
    assert state["token_ids"].numpy().tolist() == [
        [START, 5, 6, 7, 9, 10, 0, 0, 0],
        [START, 8, 12, 13, 0, 0, 0, 0, 0],
    ]


def test_a_language_model_reading_later_tokens_is_refused():
    tokens = keras.Input((None,), dtype="int32")
    both_ways = keras.layers.Bidirectional(keras.layers.GRU(8, return_sequences=True))(
        keras.layers.Embedding(V, 8)(tokens)
    )
    model = keras.Model(tokens, keras.layers.Dense(V)(both_ways))
    with pytest.raises(
        ConfigError, match="the model reads later tokens: its scores at position 0 "
    ):
        PrefixSteps(model, 8, language_model=True)


def test_a_language_model_exports_as_a_generator(language_model, tmp_path):
    lengths = dict(max_prompt_length=4, max_output_length=5)
    version = export_generator(language_model, VOCAB, tmp_path, **lengths)  # checked
    loaded = tf.saved_model.load(str(version))
    assert set(loaded.signatures) == {"serving_default", "generate", "generate_with_options"}
    tokenizer = WordPieceTokenizer(VOCAB)
    steps = PrefixSteps(language_model, 4 + 1 + 5, language_model=True)
    generator = Generator(language_model, steps, tokenizer, **lengths)
    prompts = tf.constant(["red cat", "big blue house one two three", ""])
    got = loaded.signatures["generate"](prompt=prompts)
    want = generator.generate(prompts)
    assert set(got) == set(want) == {"continuation", "tokens", "scores"}
    np.testing.assert_array_equal(got["tokens"].numpy(), want["tokens"].numpy())
    np.testing.assert_array_equal(got["continuation"].numpy(), want["continuation"].numpy())
    np.testing.assert_allclose(got["scores"].numpy(), want["scores"].numpy(), atol=1e-5)
    with pytest.raises(ConfigError, match="the model scores 20 tokens, but vocabulary has 21"):
        export_generator(language_model, [*VOCAB, "extra"], tmp_path / "other", **lengths)
