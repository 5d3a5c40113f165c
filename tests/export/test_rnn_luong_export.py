"""A `rnn-luong` run with local-p attention, `keras-attn export`ed: the translator contract holds
and no target token is aligned to a padded source position."""

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import main as cli
from keras_attn.text.corpora import load_corpus
from keras_attn.training.trainer import RunDirectory
from tests.export.served_scores import teacher_forced_log_probs

SENTENCES = [source for source, _ in load_corpus("synthetic")["test"][:3]] + [""]


def test_local_p_luong_run_exports_a_contract_checked_translator(tiny_run, tmp_path):
    run = tiny_run("rnn-luong", attention="local-p", window=3, score="concat").path
    decoder = RunDirectory(run).load_model().get_layer("decoder")
    assert type(decoder).__name__ == "LuongDecoder" and decoder.input_feeding
    assert (decoder.attention, decoder.window, decoder.score) == ("local-p", 3, "concat")

    base = tmp_path / "models"
    assert cli(["export", str(run), "--model_base_path", str(base)]) == 0  # runs the check

    loaded = tf.saved_model.load(str(base / "1"))
    out = loaded.signatures["translate_with_alignment"](text=tf.constant(SENTENCES))
    tokens, scores = out["tokens"].numpy(), out["scores"].numpy()
    alignment, source_tokens = out["alignment"].numpy(), out["source_tokens"].numpy()
    assert alignment.shape == (len(SENTENCES), tokens.shape[1], source_tokens.shape[1])

    # The served scores are the teacher-forced model's log-probabilities of the served tokens.
    model = RunDirectory(run).load_model()
    limit = min(128, 2 * source_tokens.shape[1] + 10)  # export's default length limit
    served = teacher_forced_log_probs(
        model, RunDirectory(run).tokenizers(), source_tokens, tokens, limit
    )
    for row, (ids, expected) in enumerate(served):
        np.testing.assert_allclose(scores[row], expected, rtol=1e-4, atol=1e-4)
        real = source_tokens[row] != b""
        assert np.all(alignment[row, : len(ids)][:, ~real] == 0.0)
