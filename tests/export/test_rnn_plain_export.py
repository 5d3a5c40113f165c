"""A `rnn-plain` run without context feeding, `keras-attn export`ed: the plain decoder attends to
nothing, so every served alignment is zero."""

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import main as cli
from keras_attn.text.corpora import load_corpus
from keras_attn.training.trainer import RunDirectory
from tests.export.served_scores import teacher_forced_log_probs

SENTENCES = [source for source, _ in load_corpus("synthetic")["test"][:3]] + [""]


def test_plain_run_exports_a_contract_checked_translator_with_zero_alignment(tiny_run, tmp_path):
    run = tiny_run("rnn-plain", context_feeding=False).path
    decoder = RunDirectory(run).load_model().get_layer("decoder")
    assert type(decoder).__name__ == "PlainDecoder" and not decoder.context_feeding

    base = tmp_path / "models"
    assert cli(["export", str(run), "--model_base_path", str(base)]) == 0  # runs the check

    loaded = tf.saved_model.load(str(base / "1"))
    out = loaded.signatures["translate_with_alignment"](text=tf.constant(SENTENCES))
    tokens, scores = out["tokens"].numpy(), out["scores"].numpy()
    alignment, source_tokens = out["alignment"].numpy(), out["source_tokens"].numpy()
    assert alignment.shape == (len(SENTENCES), tokens.shape[1], source_tokens.shape[1])
    assert np.all(alignment == 0.0)  # no attention: nothing is aligned (documented)
    assert (tokens != b"").sum() > 0

    # The served scores are the teacher-forced model's log-probabilities of the served tokens.
    model = RunDirectory(run).load_model()
    limit = min(128, 2 * source_tokens.shape[1] + 10)  # export's default length limit
    served = teacher_forced_log_probs(
        model, RunDirectory(run).tokenizers(), source_tokens, tokens, limit
    )
    for row, (_, expected) in enumerate(served):
        np.testing.assert_allclose(scores[row], expected, rtol=1e-4, atol=1e-4)
