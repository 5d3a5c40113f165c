"""`keras-attn train --model-file`: a family of the user's own (examples/my_family.py) trains,
resumes and exports as a built-in one does, after the user's file has gone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli import main as cli
from keras_attn.formats import MODEL_SOURCE, RunDirectory
from keras_attn.models.family import MODEL_FAMILIES
from keras_attn.serving.client import TranslatorClient
from keras_attn.serving.server import ModelServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "my_family.py"
NAME = "my-translator"  # the family examples/my_family.py registers


def flags(corpus) -> list[str]:
    return [
        "--corpus", str(corpus), "--steps", "20", "--batch-size", "16", "--units", "16",
        "--embedding-dim", "8", "--distribution", "sparsemax", "--vocab-size", "60",
        "--eval-sentences", "4", "--checkpoint-every", "10", "--quiet",
    ]  # fmt: skip


def forget_the_family() -> None:
    """As in a new process: the family is not registered (its file is imported again)."""
    MODEL_FAMILIES.pop(NAME, None)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_corpus) -> Path:
    """A 20-step run of the example family, trained from a file that is deleted afterwards."""
    root = tmp_path_factory.mktemp("model-file")
    user_file = root / "my_family.py"
    shutil.copyfile(EXAMPLE, user_file)
    run = root / "run"
    assert (
        cli(["train", "--model-file", str(user_file), *flags(tiny_corpus), "--out", str(run)]) == 0
    )
    user_file.unlink()  # the run keeps its own copy
    forget_the_family()
    return run


def test_the_run_records_the_model_file_the_options_and_the_familys_schedule(trained):
    config = json.loads((trained / "config.json").read_text())
    assert (config["model"], Path(config["model_file"]).name) == (NAME, "my_family.py")
    assert config["options"] == {
        "embedding_dim": 8, "units": 16, "cell": "lstm", "distribution": "sparsemax",
        "dropout": 0.1,
    }  # fmt: skip
    assert (config["learning_rate"], config["warmup_steps"]) == (5e-3, 50)  # the family's
    assert (trained / MODEL_SOURCE).read_bytes() == EXAMPLE.read_bytes()
    assert len((trained / "train_log.tsv").read_text().splitlines()) == 1 + 20
    model = RunDirectory(trained).load_model()
    decoder = model.get_layer("decoder")
    assert (decoder.units, model.get_layer("source_embedding").output_dim) == (16, 8)
    assert type(decoder.distribution_fn).__name__ == "Sparsemax"


def test_resume_imports_the_runs_copy_of_the_model_file(trained, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    forget_the_family()
    assert cli(["train", "--resume", "--out", str(run), "--steps", "24", "--quiet"]) == 0
    assert len((run / "train_log.tsv").read_text().splitlines()) == 1 + 24
    assert json.loads((run / "metrics.json").read_text())["steps"] == 24
    capsys.readouterr()
    assert cli(["train", "--resume", "--out", str(run), "--units", "32"]) == 2
    assert capsys.readouterr().err.startswith(
        f"keras-attn train: error: cannot resume {run} with --units 32: its config.json has "
        "--units 16;"
    )


def test_the_exported_translator_of_a_model_file_run_answers(trained, tmp_path):
    forget_the_family()
    family = RunDirectory(trained).family()  # what `keras-attn export` looks it up with
    assert (family.name, family.kind, family.options.__name__) == (
        NAME, "translator", "AttentionTranslatorOptions",
    )  # fmt: skip
    forget_the_family()  # `keras-attn export` itself must load the run's copy of the file
    base = tmp_path / "models"
    assert cli(["export", str(trained), "--model_base_path", str(base)]) == 0
    texts = ["el gato 7 come pan", "el gato 9 come pan"]
    out = tf.saved_model.load(str(base / "1")).signatures["translate"](text=tf.constant(texts))
    assert out["translation"].dtype == tf.string and out["translation"].shape == (2,)
    assert out["tokens"].shape[0] == 2 and np.all(np.isfinite(out["scores"].numpy()))
    # Served by `keras-attn serve`'s server, it answers what the SavedModel answers in-process.
    with (
        ModelServer(NAME, str(base), port=0) as server,
        TranslatorClient(f"127.0.0.1:{server.port}", model_name=NAME) as client,
    ):
        served = client.predict(texts, "translate")
    assert list(served["translation"]) == [t.decode("utf-8") for t in out["translation"].numpy()]
    np.testing.assert_allclose(served["scores"], out["scores"].numpy(), rtol=1e-6)


def test_init_from_takes_the_options_it_is_not_given_from_the_other_run(
    trained, tmp_path, tiny_corpus
):
    """Fine-tuning a run of one's own family keeps its shapes: the options not given are the
    other run's (units 16, sparsemax), not the family's defaults (units 128, softmax)."""
    forget_the_family()
    run = tmp_path / "tuned"
    flags = [
        "--model-file", str(trained / MODEL_SOURCE), "--init-from", str(trained), "--corpus",
        str(tiny_corpus), "--steps", "2", "--batch-size", "16", "--dropout", "0.2",
        "--eval-sentences", "0", "--quiet", "--out", str(run),
    ]  # fmt: skip
    assert cli(["train", *flags]) == 0
    options = json.loads((run / "config.json").read_text())["options"]
    assert options == {
        "embedding_dim": 8, "units": 16, "cell": "lstm", "distribution": "sparsemax",
        "dropout": 0.2,
    }  # fmt: skip
    tuned, origin = RunDirectory(run).load_model(), RunDirectory(trained).load_model()
    embedding = "source_embedding"
    assert tuned.get_layer("decoder").units == 16
    assert tuned.get_layer(embedding).get_weights()[0].shape == (
        origin.get_layer(embedding).get_weights()[0].shape
    )
