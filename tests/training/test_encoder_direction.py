"""`keras-attn train --encoder-direction uni --reverse-source`: a unidirectional encoder over
the reversed source trains, exports and translates."""

import json

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import main as cli
from keras_attn.layers import UnidirectionalEncoder
from keras_attn.training.trainer import RunDirectory


def test_reversed_source_run_trains_exports_and_translates(tmp_path, tiny_corpus):
    run = tmp_path / "run"
    assert cli([
        "train", "--model", "rnn-luong", "--encoder-direction", "uni", "--reverse-source",
        "--num-layers", "4", "--corpus", str(tiny_corpus), "--steps", "2", "--batch-size", "16",
        "--units", "9", "--embedding-dim", "8", "--vocab-size", "60", "--eval-sentences", "0",
        "--checkpoint-every", "2", "--out", str(run), "--quiet",
    ]) == 0  # fmt: skip
    saved = json.loads((run / "config.json").read_text())
    assert (saved["options"]["encoder_direction"], saved["options"]["reverse_source"]) == (
        "uni",
        True,
    )
    encoder = RunDirectory(run).load_model().get_layer("encoder")
    assert (type(encoder), encoder.reverse, encoder.num_layers) == (UnidirectionalEncoder, True, 4)
    base = tmp_path / "models"
    assert cli(["export", str(run), "--model_base_path", str(base)]) == 0
    signature = tf.saved_model.load(str(base / "1")).signatures["translate_with_alignment"]
    out = signature(text=tf.constant(["el gato 7 come pan", ""]))
    assert out["tokens"].shape[0] == 2 and np.all(np.isfinite(out["scores"].numpy()))
