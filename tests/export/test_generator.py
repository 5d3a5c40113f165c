import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.decoding import greedy_search
from keras_attn.export.contract import check_generator_saved_model
from keras_attn.export.generator import Generator
from keras_attn.export.saved_model import export_generator
from keras_attn.models import GPTSteps, gpt
from keras_attn.serving.servable import load_servable
from keras_attn.serving.warmup import run_warmup
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import build_wordpiece_vocab

PROMPTS = ["the black cat", "a dog", ""]


@pytest.fixture(scope="module")
def generator(tiny_pairs):
    """A tiny untrained GPT generator, built (and its functions traced) once: no test changes it."""
    tokenizer = WordPieceTokenizer(build_wordpiece_vocab([t for _, t in tiny_pairs], 300))
    model = gpt(tokenizer.vocab_size, num_layers=1, d_model=8, num_heads=2, ff_dim=16,
                max_length=16, dropout=0.0)  # fmt: skip
    steps = GPTSteps(model, max_length=16)
    return Generator(model, steps, tokenizer, max_prompt_length=8, max_output_length=6)


def greedy_reference(generator, prompts, max_length):
    """The same path by hand: START + prompt ids, prefill, greedy_search."""
    tokenizer = generator.tokenizer
    ids = generator._prompt_ids(tf.constant(prompts)).numpy()
    assert np.all(ids[:, 0] == tokenizer.start_id)
    steps = generator._steps
    result = greedy_search(
        steps.step, steps.prefill(ids), len(prompts), tokenizer.start_id, tokenizer.end_id,
        max_length,
    )  # fmt: skip
    return ids, result


def test_generate_is_greedy_decoding_of_the_prompt(generator):
    out = generator.generate(tf.constant(PROMPTS))
    ids, result = greedy_reference(generator, PROMPTS, 6)
    vocab = generator.tokenizer.vocab
    model = generator.model
    for row in range(len(PROMPTS)):
        tokens = [t.decode() for t in out["tokens"].numpy()[row] if t]
        length = int(result.lengths[row])
        assert [vocab.index(t) for t in tokens] == list(result.ids.numpy()[row, :length])
        # Scores are the full pass's log-probabilities of the generated tokens (END included).
        prompt = list(ids[row][ids[row] != 0])
        generated = list(result.ids.numpy()[row, : min(length + 1, 6)])
        logits = model(np.array([prompt + generated[:-1]])).numpy()[0, len(prompt) - 1 :]
        log_probs = tf.nn.log_softmax(logits).numpy()
        expected = log_probs[np.arange(len(generated)), generated].sum()
        np.testing.assert_allclose(out["scores"].numpy()[row], expected, rtol=1e-4, atol=1e-4)
    assert out["continuation"].shape == (len(PROMPTS),)


def test_options(generator):
    greedy = generator.generate(tf.constant(PROMPTS))
    short = generator.generate_with_options(tf.constant(PROMPTS), 2, 0.0, 0, 1.0)
    assert short["tokens"].shape[1] <= 2
    for row in range(len(PROMPTS)):
        head = [t for t in greedy["tokens"].numpy()[row] if t][:2]
        assert [t for t in short["tokens"].numpy()[row] if t] == head[: len(head)]
    # top_k = 1 is greedy at any temperature; the cap is max_output_length.
    top1 = generator.generate_with_options(tf.constant(PROMPTS), 100, 1.5, 1, 1.0)
    np.testing.assert_array_equal(top1["tokens"].numpy(), greedy["tokens"].numpy())
    sampled = generator.generate_with_options(tf.constant(PROMPTS * 4), 6, 5.0, 0, 1.0)
    assert sampled["tokens"].shape[0] == 12


def test_export_passes_the_generator_contract(generator, tmp_path):
    path = export_generator(generator, tmp_path / "lm")  # runs check_generator_saved_model
    assert path.name == "1"
    loaded = tf.saved_model.load(str(path))
    served = loaded.signatures["generate"](prompt=tf.constant(PROMPTS))
    local = generator.generate(tf.constant(PROMPTS))
    np.testing.assert_array_equal(served["tokens"].numpy(), local["tokens"].numpy())
    np.testing.assert_allclose(served["scores"].numpy(), local["scores"].numpy(), atol=1e-5)
    report = check_generator_saved_model(path, ["a cat"])
    assert set(report["signatures"]) >= {"serving_default", "generate", "generate_with_options"}
    # The warm-up requests written at export (one per signature, scalar options included) pass
    # the server's request checks and run.
    assert run_warmup(load_servable("lm", str(tmp_path / "lm"), 1)) == 3


def test_rejects_a_cache_too_small(generator):
    with pytest.raises(ValueError, match="= 17 exceeds the cache of 16"):
        Generator(generator.model, generator._steps, generator.tokenizer, 10, 6)
