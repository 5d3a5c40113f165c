"""What `--resume` does with the flags it is given: a resumed run continues with its saved config;
the flags that may change (the step target, checkpoint and evaluation settings, the time limits)
are honoured and saved, any other flag that differs from the run's value is refused in one line.
The Python API does the same with the config it is passed."""

import dataclasses
import json
import shutil

import pytest

from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.training.config import RESUMABLE, resumed_config
from keras_attn.training.trainer import RunDirectory, TrainConfig, train

FLAGS = [
    "--model", "rnn-plain", "--steps", "2", "--batch-size", "8", "--units", "8",
    "--embedding-dim", "8", "--vocab-size", "100", "--eval-sentences", "0", "--warmup-steps",
    "0", "--schedule", "cosine", "--checkpoint-every", "1", "--max-minutes", "30", "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_corpus):
    """A finished 2-step run, started with a time limit."""
    run = tmp_path_factory.mktemp("finished") / "run"
    assert cli(["train", *FLAGS, "--corpus", str(tiny_corpus), "--out", str(run)]) == 0
    return run


@pytest.fixture
def run(finished, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy


def saved(run) -> dict:
    return json.loads((run / "config.json").read_text())


def test_a_resume_keeps_the_target_takes_repeated_flags_and_drops_the_time_limit(run, capsys):
    repeated = ["--model", "rnn-plain", "--units", "8", "--learning-rate", "0.003"]
    assert cli(["train", "--resume", *repeated, "--out", str(run), "--quiet"]) == 0
    assert "resumed from" in capsys.readouterr().out
    metrics = json.loads((run / "metrics.json").read_text())
    assert (metrics["steps"], metrics["steps_this_session"]) == (2, 0)
    assert (saved(run)["steps"], saved(run)["max_minutes"]) == (2, None)


def test_a_resume_honours_and_saves_the_flags_that_may_change(run):
    flags = ["--steps", "3", "--checkpoint-every", "3", "--max-cpu-minutes", "20"]
    assert cli(["train", "--resume", *flags, "--out", str(run), "--quiet"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert (metrics["steps"], metrics["steps_this_session"]) == (3, 1)
    config = saved(run)
    assert (config["steps"], config["checkpoint_every"], config["max_cpu_minutes"]) == (3, 3, 20)
    assert config["max_minutes"] is None and config["options"]["units"] == 8


@pytest.mark.parametrize(
    "flags,named",
    [
        (["--units", "16"], "with --units 16: its config.json has --units 8"),
        (
            ["--model", "rnn-attention", "--learning-rate", "0.1"],
            "with --model rnn-attention, --learning-rate 0.1: its config.json has --model "
            "rnn-plain, --learning-rate 0.003",
        ),
        (["--no-context-feeding"], "with --context-feeding False: its config.json has "),
        (["--init-from", "elsewhere"], "with --init-from elsewhere: its config.json has "),
    ],
)
def test_a_resume_refuses_other_flags_that_differ_in_one_line(run, capsys, flags, named):
    before = {path.name: path.read_bytes() for path in run.iterdir() if path.is_file()}
    assert cli(["train", "--resume", *flags, "--out", str(run), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"keras-attn train: error: cannot resume {run} {named}")
    assert err.endswith(
        "; resuming may change --steps, --checkpoint-every, --eval-sentences, --eval-every, "
        "--max-minutes and --max-cpu-minutes only\n"
    )
    assert len(err.splitlines()) == 1
    assert {path.name: path.read_bytes() for path in run.iterdir() if path.is_file()} == before


def test_the_python_api_resumes_with_the_saved_config_or_the_changes_it_may_make(run):
    config = RunDirectory(run).read_config()
    with pytest.raises(ConfigError) as caught:
        asked = dataclasses.replace(config, options={**config.options, "units": 16}, steps=3)
        train(run, asked, resume=True, progress=False)
    assert set(caught.value.fields) == {"units", *RESUMABLE}
    with pytest.raises(ConfigError, match="model='rnn-attention'"):
        train(run, TrainConfig(steps=3), resume=True, progress=False)  # a default config
    metrics = train(run, None, resume=True, progress=False, log=lambda line: None)
    assert (metrics["steps"], metrics["steps_this_session"]) == (2, 0)
    assert saved(run)["max_minutes"] is None


def test_resumed_config_changes_only_what_resume_may_change():
    saved_config = TrainConfig(steps=10, options={"units": 8}, max_minutes=5.0, eval_sentences=7)
    assert resumed_config(saved_config, None, "r") == dataclasses.replace(
        saved_config, max_minutes=None
    )
    asked = dataclasses.replace(saved_config, steps=20, checkpoint_every=5, max_minutes=None)
    assert resumed_config(saved_config, asked, "r") == asked
    with pytest.raises(ConfigError, match="^cannot resume r with seed=1, units=9: its config"):
        resumed_config(saved_config, dataclasses.replace(asked, options={"units": 9}, seed=1), "r")


def test_a_field_left_unset_keeps_the_saved_value():
    # The config that started a fine-tuning run leaves num_layers to its init_from run.
    saved_config = TrainConfig(model="bert-classifier", options={"num_layers": 1}, init_from="bert")
    asked = TrainConfig(model="bert-classifier", init_from="bert", steps=7)
    assert resumed_config(saved_config, asked, "r") == dataclasses.replace(saved_config, steps=7)
