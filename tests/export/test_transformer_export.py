"""A pre-norm `transformer` run, `keras-attn export`ed: the translator contract, alignment rows
that are distributions over the real source tokens; the transformer flags of `keras-attn train`."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import main as cli
from keras_attn.text.corpora import load_corpus
from keras_attn.training.trainer import RunDirectory
from tests.export.served_scores import teacher_forced_log_probs

SENTENCES = [source for source, _ in load_corpus("synthetic")["test"][:3]] + [""]
MAX_OUTPUT = 12


def test_pre_norm_transformer_run_exports_a_contract_checked_translator(tiny_run, tmp_path):
    run = tiny_run("transformer", normalize_first=True).path
    model = RunDirectory(run).load_model()
    decoder = model.get_layer("decoder")
    assert type(decoder).__name__ == "TransformerDecoder" and decoder.normalize_first

    base = tmp_path / "models"
    assert (
        cli(
            [
                "export",
                str(run),
                "--model_base_path",
                str(base),
                "--max-output-length",
                str(MAX_OUTPUT),
            ]
        )
        == 0
    )  # fmt: skip  (runs the contract check)

    loaded = tf.saved_model.load(str(base / "1"))
    out = loaded.signatures["translate_with_alignment"](text=tf.constant(SENTENCES))
    tokens, scores = out["tokens"].numpy(), out["scores"].numpy()
    alignment, source_tokens = out["alignment"].numpy(), out["source_tokens"].numpy()
    assert alignment.shape == (len(SENTENCES), tokens.shape[1], source_tokens.shape[1])
    assert tokens.shape[1] <= MAX_OUTPUT

    # The served scores are the teacher-forced model's log-probabilities of the served tokens.
    limit = min(MAX_OUTPUT, 2 * source_tokens.shape[1] + 10)  # export's length limit
    served = teacher_forced_log_probs(
        model, RunDirectory(run).tokenizers(), source_tokens, tokens, limit
    )
    for row, (ids, expected) in enumerate(served):
        np.testing.assert_allclose(scores[row], expected, rtol=1e-4, atol=1e-4)
        real = source_tokens[row] != b""
        rows = alignment[row, : len(ids)]
        assert np.all(rows[:, ~real] == 0.0)
        if real.any():
            np.testing.assert_allclose(rows.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--model", "rnn-attention", "--num-heads", "2"], "--num-heads does not apply"),
        (["--model", "transformer", "--d-model", "0"], "--d-model must be positive, got 0"),
        (
            ["--model", "transformer", "--units", "8", "--score", "dot"],
            "--units, --score do not apply",
        ),
    ],
)
def test_transformer_flags_are_checked(tmp_path, capsys, flags, message):
    assert cli(["train", *flags, "--steps", "1", "--out", str(tmp_path / "run")]) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
