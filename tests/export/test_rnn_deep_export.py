"""A stacked RNN translator exported with beam search: a 2-layer GRU `rnn-plain` run.

Every recurrent family two layers deep is exported, contract-checked and served in
test_every_family.py.
"""

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import main as cli
from keras_attn.text.corpora import load_corpus

SENTENCES = [source for source, _ in load_corpus("synthetic")["test"][:3]] + [""]
MAX_OUTPUT = 12


def export(run, base, *flags):
    """`keras-attn export` (it runs the contract check); returns the version directory."""
    command = ["export", str(run), "--model_base_path", str(base)]
    assert cli([*command, "--max-output-length", str(MAX_OUTPUT), *flags]) == 0
    return base / "1"


def test_two_layer_plain_run_exports_with_beam_search(tiny_run, tmp_path):
    run = tiny_run("rnn-plain", cell="gru", num_layers=2).path
    version = export(run, tmp_path / "models", "--decoder", "beam", "--beam-size", "2")
    loaded = tf.saved_model.load(str(version))
    want = loaded.signatures["translate_with_alignment"](text=tf.constant(SENTENCES))
    assert want["translation"].shape == (len(SENTENCES),)
    assert np.all(want["alignment"].numpy() == 0.0)  # the plain decoder attends to nothing
