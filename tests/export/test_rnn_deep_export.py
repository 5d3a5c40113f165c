"""Stacked RNN translators end to end: `keras-attn train --num-layers N`, export, serve.

A 4-layer `rnn-luong` run (Luong et al.'s depth, tiny widths) exports a contract-checked
SavedModel whose step view carries every layer's (h, c); `keras-attn serve` answers it over
gRPC as the loaded SavedModel does, and its scores are the teacher-forced log-probabilities of
the run's model. A 2-layer `rnn-plain` run exports with beam search.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import main as cli
from keras_attn.formats import RunDirectory
from keras_attn.serving.client import TranslatorClient
from keras_attn.testing.server_process import serve_in_subprocess
from keras_attn.text.corpora import load_corpus
from tests.export.served_scores import teacher_forced_log_probs

# A training, two exports and a server start take minutes on a loaded 2-core machine.
pytestmark = pytest.mark.slow

SENTENCES = [source for source, _ in load_corpus("synthetic")["test"][:3]] + [""]
MAX_OUTPUT = 12


def train(out, *flags):
    """`keras-attn train` a few steps of a tiny rnn model on `synthetic`; returns the run.

    No test here reads the run's dev metrics, so the dev scoring is skipped, and the vocabulary
    comes from the first 2000 pairs instead of the whole corpus (the tests need a run, not a
    good one)."""
    assert cli([
        "train", "--corpus", "synthetic", "--steps", "3", "--batch-size", "16",
        "--train-examples", "2000", "--units", "16", "--embedding-dim", "8",
        "--vocab-size", "400", "--eval-sentences", "0",
        "--checkpoint-every", "3", "--out", str(out), "--quiet", *flags,
    ]) == 0  # fmt: skip
    return out


def export(run, base, *flags):
    """`keras-attn export` (it runs the contract check); returns the version directory."""
    command = ["export", str(run), "--model_base_path", str(base)]
    assert cli([*command, "--max-output-length", str(MAX_OUTPUT), *flags]) == 0
    return base / "1"


def assert_scores_are_teacher_forced(run, model, outputs):
    """The served scores are `model`'s (the run's) log-probabilities of the served tokens."""
    tokens, scores = outputs["tokens"].numpy(), outputs["scores"].numpy()
    source_tokens = outputs["source_tokens"].numpy()
    served = teacher_forced_log_probs(
        model, RunDirectory(run).tokenizers(), source_tokens, tokens, MAX_OUTPUT
    )
    for row, (_, expected) in enumerate(served):
        np.testing.assert_allclose(scores[row], expected, rtol=1e-4, atol=1e-4)


def test_four_layer_luong_run_exports_and_answers_over_grpc(tmp_path):
    run = train(tmp_path / "run", "--model", "rnn-luong", "--num-layers", "4")
    assert json.loads((run / "config.json").read_text())["num_layers"] == 4
    model = RunDirectory(run).load_model()
    assert model.get_layer("decoder").num_layers == model.get_layer("encoder").num_layers == 4

    base = tmp_path / "models" / "luong"
    loaded = tf.saved_model.load(str(export(run, base)))
    want = loaded.signatures["translate_with_alignment"](text=tf.constant(SENTENCES))
    alignment, source_tokens = want["alignment"].numpy(), want["source_tokens"].numpy()
    assert alignment.shape == (len(SENTENCES), want["tokens"].shape[1], source_tokens.shape[1])
    for row in range(len(SENTENCES)):  # padded source positions get no attention
        assert np.all(alignment[row][:, source_tokens[row] == b""] == 0.0)
    assert_scores_are_teacher_forced(run, model, want)

    with serve_in_subprocess(base, "luong") as server:
        with TranslatorClient(server.target, "luong", timeout=60) as client:
            served = client.translate(SENTENCES)
    assert served == [text.decode() for text in want["translation"].numpy()]


def test_two_layer_plain_run_exports_with_beam_search(tmp_path):
    run = train(tmp_path / "run", "--model", "rnn-plain", "--cell", "gru", "--num-layers", "2")
    version = export(run, tmp_path / "models", "--decoder", "beam", "--beam-size", "2")
    loaded = tf.saved_model.load(str(version))
    want = loaded.signatures["translate_with_alignment"](text=tf.constant(SENTENCES))
    assert want["translation"].shape == (len(SENTENCES),)
    assert np.all(want["alignment"].numpy() == 0.0)  # the plain decoder attends to nothing
