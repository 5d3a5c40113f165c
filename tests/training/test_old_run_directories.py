"""Run directories whose `config.json` holds a built-in family's options as top-level keys (as
runs were written before `TrainConfig.options` held every family's options) still load, resume,
export and start other runs with `--init-from`."""

import dataclasses
import json
import shutil

import pytest

from keras_attn.cli import main as cli
from keras_attn.formats import CONFIG_FILE
from keras_attn.models.family_options import BUILT_IN_OPTIONS
from keras_attn.training.config import TrainConfig
from keras_attn.training.trainer import RunDirectory, train

OPTIONS = {"units": 16, "embedding_dim": 8, "attention": "local-m", "window": 3}
TINY = dict(
    model="rnn-luong", steps=2, batch_size=16, vocab_size=120, max_length=20, eval_sentences=0,
    checkpoint_every=2, mixed_precision="float32",
)  # fmt: skip
# Every option of the built-in families was a field of its own, None unless set (those of
# cnn-rnn, which had its own options, too: None keys are dropped); the four below always had a
# value.
FIELDS = {name: None for each in BUILT_IN_OPTIONS.values() for name in each.__dataclass_fields__}
VALUED = {"embedding_dim": 128, "units": 256, "cell": "lstm", "dropout": 0.1}


def old_format(fields: dict) -> dict:
    """`config.json` as written when the options were top-level keys: a field per option of
    every family (None when not set, the four with values always set), no `options`."""
    fields = dict(fields)
    options = fields.pop("options")
    given = {name: value for name, value in options.items() if name in {*OPTIONS, *VALUED}}
    return {**fields, **FIELDS, **VALUED, **given}


@pytest.fixture(scope="module")
def old_run(tmp_path_factory, tiny_corpus):
    """A tiny trained rnn-luong run whose config.json is rewritten into the old format."""
    run = tmp_path_factory.mktemp("old") / "run"
    config = TrainConfig(corpus=str(tiny_corpus), options=OPTIONS, **TINY)
    train(run, config, progress=False, log=lambda line: None)
    saved = json.loads((run / CONFIG_FILE).read_text())
    (run / CONFIG_FILE).write_text(json.dumps(old_format(saved)))
    return run, saved["options"]


def test_an_old_config_reads_its_family_options_into_options(old_run):
    run, options = old_run
    config = RunDirectory(run).read_config()
    assert config.options == options  # given ones, the others at their defaults
    assert (config.options["attention"], config.options["gru_reset_after"]) == ("local-m", True)
    assert "d_model" not in config.options and "penalty" not in config.options
    config.validate()
    fields = json.loads((run / CONFIG_FILE).read_text())
    assert TrainConfig.from_fields({**fields, "model": "transformer"}).options == {
        "num_layers": 2, "d_model": 128, "num_heads": 4, "ff_dim": 512, "dropout": 0.1,
        "normalize_first": False,
    }  # fmt: skip


def test_an_old_run_exports(old_run, tmp_path):
    run, _ = old_run
    assert cli(["export", str(run), "--model_base_path", str(tmp_path / "models")]) == 0
    assert (tmp_path / "models" / "1" / "saved_model.pb").is_file()


def test_an_old_run_starts_another_with_its_options(old_run, tmp_path, tiny_corpus):
    run, options = old_run
    out = tmp_path / "fine"
    flags = ["--model", "rnn-luong", "--corpus", str(tiny_corpus), "--steps", "1"]
    flags += ["--batch-size", "16", "--eval-sentences", "0", "--mixed-precision", "float32"]
    assert cli(["train", *flags, "--init-from", str(run), "--out", str(out), "--quiet"]) == 0
    assert RunDirectory(out).read_config().options == options
    assert json.loads((out / "init_from.json").read_text())["new"] == []


def test_an_old_run_resumes_and_keeps_its_options(old_run, tmp_path, capsys):
    run, options = old_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)  # the module's run stays in the old format
    assert cli(["train", "--resume", "--out", str(copy), "--units", "17", "--quiet"]) == 2
    assert "with --units 17: its config.json has --units 16" in capsys.readouterr().err
    assert cli(["train", "--resume", "--out", str(copy), "--steps", "4", "--quiet"]) == 0
    config = RunDirectory(copy).read_config()
    assert (config.steps, config.options) == (4, options)
    assert json.loads((copy / CONFIG_FILE).read_text())["options"] == options  # now saved so
    assert dataclasses.asdict(config).keys() == dataclasses.asdict(TrainConfig()).keys()
