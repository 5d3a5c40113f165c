"""`keras-attn train --model gpt`, then `keras-attn export`: the generator contract."""

import json
import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import main as cli
from keras_attn.text.corpora import load_corpus
from keras_attn.training.data import tokenize_sentences
from keras_attn.training.trainer import RunDirectory

PROMPTS = ["The nurse", "A turtle that is", ""]
MAX_LENGTH, MAX_OUTPUT = 20, 8


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("gpt") / "run"
    assert cli([
        "train", "--model", "gpt", "--num-layers", "1", "--d-model", "16", "--num-heads", "2",
        "--ff-dim", "32", "--dropout", "0", "--steps", "4", "--batch-size", "16",
        "--vocab-size", "300", "--max-length", str(MAX_LENGTH), "--eval-sentences", "12",
        "--checkpoint-every", "4", "--out", str(run), "--quiet",
    ]) == 0  # fmt: skip
    return run


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_gpt_run_trains_exports_and_generates(gpt_run, tmp_path):
    run = RunDirectory(gpt_run)
    config = json.loads(run.file("config.json").read_text())
    assert (config["model"], config["options"]["d_model"], config["options"]["num_heads"]) == (
        "gpt",
        16,
        2,
    )
    assert run.file("vocab.txt").exists() and not run.file("source_vocab.txt").exists()
    model, tokenizer = run.load_model(), run.tokenizer()
    assert model.get_layer("embedding").max_length == MAX_LENGTH + 1 + 128

    # metrics.json: perplexity of the saved model on the dev split's target side.
    metrics = json.loads(run.file("metrics.json").read_text())
    assert "dev_bleu" not in metrics and metrics["steps"] == 4
    dev = [target for _, target in load_corpus("synthetic")["dev"][:12]]
    nll, count = 0.0, 0
    for ids in tokenize_sentences(dev, tokenizer, MAX_LENGTH):
        log_probs = log_softmax(np.asarray(model(ids[None, :-1]), np.float64)[0])
        nll -= log_probs[np.arange(len(ids) - 1), ids[1:]].sum()
        count += len(ids) - 1
    assert metrics["dev_tokens"] == count
    np.testing.assert_allclose(metrics["dev_perplexity"], math.exp(nll / count), rtol=1e-4)

    base = tmp_path / "models"
    command = ["export", str(gpt_run), "--model_base_path", str(base)]
    assert cli([*command, "--max-output-length", str(MAX_OUTPUT)]) == 0  # + contract check

    loaded = tf.saved_model.load(str(base / "1"))
    assert {"serving_default", "generate", "generate_with_options"} <= set(loaded.signatures)
    out = loaded.signatures["generate"](prompt=tf.constant(PROMPTS))
    tokens, scores = out["tokens"].numpy(), out["scores"].numpy()
    assert tokens.shape[0] == len(PROMPTS) and tokens.shape[1] <= MAX_OUTPUT
    vocab = tokenizer.vocab
    for row, prompt in enumerate(PROMPTS):
        # Greedy: every generated token is the argmax of a full pass over START + prompt + the
        # tokens before it, and the score sums their log-probabilities (END when produced).
        context = [tokenizer.start_id, *tokenizer.tokenize(tf.constant([prompt]))[0].numpy()]
        generated = [vocab.index(t.decode()) for t in tokens[row] if t]
        text = tokenizer.detokenize(tf.constant([[*generated, tokenizer.pad_id]]))[0]
        assert out["continuation"][row].numpy() == text.numpy()
        if len(generated) < MAX_OUTPUT:
            generated.append(tokenizer.end_id)
        ids = np.array([context + generated[:-1]], np.int32)
        log_probs = log_softmax(np.asarray(model(ids), np.float64)[0, len(context) - 1 :])
        np.testing.assert_array_equal(log_probs.argmax(-1), generated)
        expected = log_probs[np.arange(len(generated)), generated].sum()
        np.testing.assert_allclose(scores[row], expected, rtol=1e-4, atol=1e-4)

    def options(max_length, temperature, top_k, top_p):
        return loaded.signatures["generate_with_options"](
            prompt=tf.constant(PROMPTS),
            max_length=tf.constant(max_length, tf.int32),
            temperature=tf.constant(temperature, tf.float32),
            top_k=tf.constant(top_k, tf.int32),
            top_p=tf.constant(top_p, tf.float32),
        )["tokens"].numpy()

    short = options(3, 0.0, 0, 1.0)
    assert short.shape[1] <= 3
    np.testing.assert_array_equal(short, tokens[:, : short.shape[1]])
    np.testing.assert_array_equal(options(100, 2.0, 1, 1.0), tokens)  # top_k = 1 is greedy


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--decoder", "beam"], "--decoder beam: no beam search for a gpt run"),
        (["--beam-size", "3"], "--beam-size: no beam search for a gpt run"),
        (["--length-penalty", "1"], "--length-penalty: no beam search for a gpt run"),
        (["--max-output-length", "129"], "--max-output-length 129 does not fit this gpt run"),
        (["--max-output-length", "0"], "--max-output-length must be positive, got 0"),
    ],
)
def test_export_flag_mistakes_are_one_line_errors(gpt_run, tmp_path, capsys, flags, message):
    base = tmp_path / "m"
    assert cli(["export", str(gpt_run), "--model_base_path", str(base), *flags]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1
    assert not base.exists()
