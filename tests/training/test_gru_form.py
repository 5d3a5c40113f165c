"""`keras-attn train --cell gru --no-gru-reset-after`: Cho et al.'s GRU trains and exports.

`--gru-reset-after / --no-gru-reset-after` set the rnn families' option `gru_reset_after`, which
they pass to their builders as `reset_after`; anywhere else it is a one-line ConfigError.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import build_parser
from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.models.families import get_family
from keras_attn.training.config import TrainConfig
from keras_attn.training.trainer import RunDirectory


def parse(*flags):
    return build_parser().parse_args(["train", "--out", "run", *flags])


def test_flags_set_the_option_and_the_builders_get_reset_after():
    option = "options.gru_reset_after"
    assert getattr(parse(), option) is True and option not in parse().given
    assert getattr(parse("--gru-reset-after"), option) is True
    assert getattr(parse("--no-gru-reset-after"), option) is False
    tiny = {"units": 4, "embedding_dim": 4, "cell": "gru"}
    for model in ("rnn-plain", "rnn-attention", "rnn-luong"):
        config = TrainConfig(model=model, options={**tiny, "gru_reset_after": False})
        config.validate()
        options = config.model_hyperparameters()
        assert options["gru_reset_after"] is False
        built = get_family(model).build(12, 12, **options)
        assert built.get_layer("encoder").reset_after is False
        assert TrainConfig(model=model, options=tiny).model_hyperparameters()["gru_reset_after"]


def test_the_papers_form_with_an_lstm_is_a_config_error_naming_both_fields():
    with pytest.raises(ConfigError, match="needs cell='gru', got cell='lstm'") as caught:
        TrainConfig(
            model="rnn-attention",
            options={"cell": "lstm", "gru_reset_after": False},
        ).validate()
    assert set(caught.value.fields) == {"gru_reset_after", "cell"}
    # Keras' form is the default, whatever the cell.
    TrainConfig(model="rnn-attention", options={"gru_reset_after": True}).validate()


def test_the_command_line_reports_it_in_one_line_with_flags(tmp_path, capsys):
    assert cli(["train", "--no-gru-reset-after", "--out", str(tmp_path / "lstm")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--gru-reset-after" in err and "--cell" in err
    flags = ["--model", "transformer", "--gru-reset-after"]
    assert cli(["train", *flags, "--out", str(tmp_path / "transformer")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--gru-reset-after does not apply" in err
    assert not (tmp_path / "lstm").exists() and not (tmp_path / "transformer").exists()


def graph_ops(signature) -> set[str]:
    """Every op type in a SavedModel signature's graph, its function library included."""
    graph_def = signature.graph.as_graph_def()
    ops = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        ops |= {node.op for node in function.node_def}
    return ops


def test_paper_gru_run_trains_exports_and_translates(tmp_path, tiny_corpus):
    run = tmp_path / "run"
    assert cli([
        "train", "--model", "rnn-luong", "--no-input-feeding", "--cell", "gru",
        "--no-gru-reset-after", "--corpus", str(tiny_corpus), "--steps", "4", "--batch-size",
        "16", "--units", "16", "--embedding-dim", "8", "--vocab-size", "60",
        "--eval-sentences", "4", "--checkpoint-every", "4", "--out", str(run), "--quiet",
    ]) == 0  # fmt: skip
    saved = json.loads((run / "config.json").read_text())
    assert (saved["options"]["cell"], saved["options"]["gru_reset_after"]) == ("gru", False)
    model = RunDirectory(run).load_model()
    encoder, decoder = model.get_layer("encoder"), model.get_layer("decoder")
    assert (encoder.reset_after, decoder.reset_after) == (False, False)
    cells = [encoder.rnn.forward_layer.cell, encoder.rnn.backward_layer.cell, decoder.rnn.cell]
    assert [(cell.reset_after, tuple(cell.bias.shape)) for cell in cells] == [
        (False, (24,)),
        (False, (24,)),
        (False, (48,)),
    ]

    base = tmp_path / "models"
    assert cli(["export", str(run), "--model_base_path", str(base)]) == 0  # runs the contract
    loaded = tf.saved_model.load(str(base / "1"))
    signature = loaded.signatures["translate_with_alignment"]
    ops = graph_ops(signature)
    assert "While" in ops or "StatelessWhile" in ops  # the generic GRU loop is in the graph
    assert not [op for op in ops if op.startswith("Cudnn")]
    out = signature(text=tf.constant(["el gato 7 come pan", ""]))
    assert out["tokens"].shape[0] == 2 and np.all(np.isfinite(out["scores"].numpy()))
