import dataclasses
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from keras_attn.cli import main as cli
from keras_attn.export.translator import Translator
from keras_attn.formats import VOCAB
from keras_attn.models.bart import bart
from keras_attn.models.families import (
    bert_classifier_model,
    bert_pretraining_model,
    get_family,
    gpt_classifier_model,
)
from keras_attn.text.vocab import save_vocab
from keras_attn.training.trainer import (
    CONFIG_FILE,
    MODEL_FILE,
    SOURCE_VOCAB,
    TARGET_VOCAB,
    RunDirectory,
    TrainConfig,
)

SENTENCES = ["el gato negro", "la casa", ""]


@pytest.fixture(scope="module")
def untrained_run(tmp_path_factory, vocabularies):
    """An untrained run directory laid out as `keras-attn train` writes it, built once."""
    run = RunDirectory(tmp_path_factory.mktemp("cli") / "run")
    run.path.mkdir()
    config = TrainConfig(units=16, embedding_dim=8, dropout=0.0, max_length=20)
    run.write_json(CONFIG_FILE, dataclasses.asdict(config))
    for name, vocab in zip((SOURCE_VOCAB, TARGET_VOCAB), vocabularies, strict=True):
        save_vocab(run.file(name), vocab)
    model = get_family(config.model).build(
        len(vocabularies[0]), len(vocabularies[1]), **config.model_hyperparameters()
    )
    model.save(run.file(MODEL_FILE))
    return run.path


@pytest.fixture
def run_dir(untrained_run, tmp_path):
    """A fresh copy of `untrained_run` (a test may rewrite its model)."""
    return shutil.copytree(untrained_run, tmp_path / "run")


def graph_ops(path):
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((path / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    return {node.op for node in graph.node} | {
        node.op for function in graph.library.function for node in function.node_def
    }


def in_process_translator(run_dir, **kwargs):
    run = RunDirectory(run_dir)
    model = run.load_model()
    source, target = run.tokenizers()
    steps = get_family(run.read_config().model).decoding_steps(model, kwargs["max_output_length"])
    return Translator(model, steps, source, target, max_source_length=20, **kwargs)


def test_export_with_the_beam_decoder(run_dir, tmp_path):
    base = tmp_path / "models"
    flags = ["--decoder", "beam", "--beam-size", "3", "--length-penalty", "0.8"]
    command = ["export", str(run_dir), "--model_base_path", str(base), "--max-output-length", "9"]
    assert cli([*command, *flags]) == 0  # includes the contract check
    # The beam's top-k over beam * V candidates is in the graph (a greedy export has no TopKV2).
    assert "TopKV2" in graph_ops(base / "1")

    loaded = tf.saved_model.load(str(base / "1"))
    translator = in_process_translator(
        run_dir, max_output_length=9, decoder="beam", beam_size=3, length_penalty=0.8
    )
    for signature in ("serving_default", "translate", "translate_with_alignment"):
        got = loaded.signatures[signature](text=tf.constant(SENTENCES))
        method = "translate" if signature != "translate_with_alignment" else signature
        want = getattr(translator, method)(tf.constant(SENTENCES))
        assert set(got) == set(want)
        for name, value in want.items():
            if value.dtype == tf.float32:
                np.testing.assert_allclose(got[name].numpy(), value.numpy(), rtol=1e-5, atol=1e-6)
            else:
                np.testing.assert_array_equal(got[name].numpy(), value.numpy())


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--beam-size", "3"], "--beam-size only apply to --decoder beam"),
        (["--length-penalty", "1"], "--length-penalty only apply to --decoder beam"),
        (["--decoder", "beam", "--beam-size", "0"], "Received: --beam-size 0"),
    ],
)
def test_decoder_flag_mistakes_are_one_line_errors(run_dir, tmp_path, capsys, flags, message):
    command = ["export", str(run_dir), "--model_base_path", str(tmp_path / "m"), *flags]
    assert cli(command) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error
    assert not (tmp_path / "m").exists() or not any((tmp_path / "m").iterdir())


def test_a_model_with_non_finite_weights_is_not_exported(run_dir, tmp_path, capsys):
    run = RunDirectory(run_dir)
    model = run.load_model()
    weights = model.get_weights()
    weights[-1][0] = np.nan
    model.set_weights(weights)
    model.save(run.file(MODEL_FILE))
    base = tmp_path / "models"
    assert cli(["export", str(run_dir), "--model_base_path", str(base)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"keras-attn export: error: {run.file(MODEL_FILE)} has non-finite ")
    assert "the run diverged" in error and len(error.splitlines()) == 1
    assert not base.exists() or not any(base.iterdir())


NOT_EXPORTED = {
    "bert": lambda vocabulary: bert_pretraining_model(vocabulary, 1, 8, 2, 16),
    "bart": lambda vocabulary: bart(vocabulary, 1, 8, 2, 16),
    "bert-classifier": lambda vocabulary: bert_classifier_model(vocabulary, 3, 1, 8, 2, 16),
    "gpt-classifier": lambda vocabulary: gpt_classifier_model(
        vocabulary, 3, 1, 8, 2, 16, max_length=20
    ),
}


@pytest.mark.parametrize("model_name", sorted(NOT_EXPORTED))
def test_pretraining_and_classifier_runs_are_refused_in_one_line(
    tmp_path, vocabularies, capsys, model_name
):
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    config = TrainConfig(model=model_name, num_layers=1, d_model=8, num_heads=2, ff_dim=16)
    run.write_json(CONFIG_FILE, dataclasses.asdict(config))
    save_vocab(run.file(VOCAB), vocabularies[0])
    NOT_EXPORTED[model_name](len(vocabularies[0])).save(run.file(MODEL_FILE))
    base = tmp_path / "models"
    assert cli(["export", str(run.path), "--model_base_path", str(base)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"keras-attn export: error: a {model_name} run is not exported: ")
    assert "--init-from" in error and len(error.splitlines()) == 1
    assert not base.exists()
