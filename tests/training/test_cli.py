"""`keras-attn train`'s flags come from `TrainConfig`'s fields."""

import dataclasses

import pytest

from keras_attn.cli import build_parser
from keras_attn.training.config import TrainConfig

# The flags and defaults `keras-attn train` has always had (besides --out, required).
DEFAULTS = {
    "model": "rnn-attention", "corpus": "synthetic", "steps": 2000, "batch_size": 64,
    "learning_rate": None, "warmup_steps": None, "schedule": None, "decay_start": None,
    "decay_every": None, "optimizer": "adam", "clipnorm": 5.0, "label_smoothing": 0.0,
    "mixed_precision": "auto", "seed": 0, "max_length": 80, "vocab_size": 2000,
    "embedding_dim": 128, "units": 256, "cell": "lstm", "dropout": 0.1, "score": None,
    "distribution": None, "attention": None, "window": None, "input_feeding": None,
    "position_gradient_scale": None, "context_feeding": None, "num_layers": None,
    "d_model": None, "num_heads": None, "ff_dim": None, "normalize_first": None,
    "checkpoint_every": 200, "eval_sentences": 1000, "max_minutes": None,
    "max_cpu_minutes": None, "distribute": "none", "resume": False, "quiet": False,
    "init_from": None, "vocab_from": None, "train_examples": None, "examples_per_class": None,
    "encoder_learning_rate": None, "encoder_warmup_steps": None, "gru_reset_after": None,
    "new_source_encoder_layers": None, "decoder_layers": None, "penalty": None, "side": None,
    "mask_rate": None, "noises": None, "scheduled_sampling": None, "sampling_constant": None,
    "sampling_floor": None, "model_file": None, "options": None,
}  # fmt: skip


def parse(*flags):
    return build_parser().parse_args(["train", "--out", "run", *flags])


def test_flags_and_defaults():
    args = vars(parse())
    assert {k: v for k, v in args.items() if k in DEFAULTS} == DEFAULTS
    assert set(args) == {*DEFAULTS, "out", "command", "func", "flags", "given"}
    fields = {field.name: field.default for field in dataclasses.fields(TrainConfig)}
    assert fields == {k: v for k, v in DEFAULTS.items() if k in fields}


def test_flags_take_their_field_types_and_choices(capsys):
    args = parse("--batch-size", "8", "--learning-rate", "0.5", "--no-input-feeding",
                 "--normalize-first", "--score", "dot", "--optimizer", "sgd")  # fmt: skip
    assert (args.batch_size, args.learning_rate) == (8, 0.5)
    assert (args.input_feeding, args.normalize_first) == (False, True)
    assert (args.score, args.optimizer) == ("dot", "sgd")
    for flag, value in (("--optimizer", "rmsprop"), ("--cell", "rnn"), ("--steps", "1.5")):
        with pytest.raises(SystemExit):
            parse(flag, value)
        assert flag in capsys.readouterr().err


def test_help_names_other_options_by_their_flags(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "halved every --decay-every steps from --decay-start" in help_text
    assert "{" + "steps}" not in help_text and "h~_{t-1}" in help_text


def test_a_bug_keeps_its_traceback_and_a_config_error_is_one_line(tmp_path, monkeypatch, capsys):
    from keras_attn.cli import main
    from keras_attn.errors import ConfigError
    from keras_attn.training import trainer

    def broken(*args, **kwargs):
        raise ValueError("a bug, not a mistake in the flags")

    monkeypatch.setattr(trainer, "train", broken)
    with pytest.raises(ValueError, match="a bug"):
        main(["train", "--out", str(tmp_path / "run")])

    def refuses(*args, **kwargs):
        raise ConfigError(
            "max_cpu_minutes=2.5 needs batch_size=4", ["max_cpu_minutes", "batch_size"]
        )

    monkeypatch.setattr(trainer, "train", refuses)
    assert main(["train", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err == "keras-attn train: error: --max-cpu-minutes 2.5 needs --batch-size 4\n"


def test_python_dash_m_reports_config_errors_in_one_line(tmp_path):
    import subprocess
    import sys

    command = [sys.executable, "-m", "keras_attn.cli", "train", "--steps", "0", "--out"]
    done = subprocess.run([*command, str(tmp_path / "r")], capture_output=True, text=True)
    assert done.returncode == 2
    assert (
        done.stderr.splitlines()[-1] == "keras-attn train: error: --steps must be positive, got 0"
    )


def test_the_choices_of_the_flags_are_the_registries_names():
    from keras_attn.distributions import DISTRIBUTIONS
    from keras_attn.layers.recurrent.luong_decoder import ATTENTIONS
    from keras_attn.models.show_attend_tell.model import ATTENTIONS as IMAGE_ATTENTIONS
    from keras_attn.scores import SCORES
    from keras_attn.training import config, optimizers, scheduled_sampling, schedules, strategy
    from keras_attn.training.cli import STRATEGIES

    assert config.SCORES == tuple(sorted(SCORES))
    assert config.DISTRIBUTIONS == tuple(sorted(DISTRIBUTIONS))
    assert config.ATTENTIONS == tuple(ATTENTIONS)
    assert config.IMAGE_ATTENTIONS == tuple(IMAGE_ATTENTIONS)
    assert config.OPTIMIZERS == tuple(optimizers.OPTIMIZERS)
    assert config.SCHEDULES == tuple(schedules.SCHEDULES)
    assert config.SAMPLING_SCHEDULES == tuple(scheduled_sampling.SCHEDULES)
    assert STRATEGIES == tuple(strategy.STRATEGIES)


def test_help_gives_every_default_and_what_resume_may_change(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for field in dataclasses.fields(TrainConfig):
        if field.default is not None:
            assert f"(default: {field.default})" in help_text, field.name
    assert "auto picks mixed_bfloat16 on a TPU or on GPUs of compute capability 8.0" in help_text
    unwrapped = help_text.replace("- ", "-")  # argparse wraps lines after hyphens
    assert (
        "a flag not given keeps the run's value. --steps, --checkpoint-every, --eval-sentences, "
        "--max-minutes and --max-cpu-minutes (limits of this call only), --quiet and "
        "--distribute may change; any other flag must repeat the run's value"
    ) in unwrapped


def test_the_flags_given_are_told_from_the_defaults():
    assert parse().given == ()
    args = parse("--steps", "2000", "--no-input-feeding", "--units", "8", "--steps", "5")
    assert sorted(set(args.given)) == ["input_feeding", "steps", "units"]
    assert (args.steps, args.units, args.input_feeding) == (5, 8, False)


# Runs `keras-attn train` with each argv of the JSON list in argv[1]: one line on stderr and exit
# status 2 each, and TensorFlow and Keras never imported.
NO_TENSORFLOW = r"""
import contextlib, io, json, sys

import keras_attn.training.cli
from keras_attn.cli import main

assert "tensorflow" not in sys.modules and "keras" not in sys.modules
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["train", *argv])
    print(code, err.getvalue(), end="")
assert "tensorflow" not in sys.modules and "keras" not in sys.modules, "imported"
"""


def test_path_and_resume_mistakes_are_reported_before_tensorflow_loads(tmp_path):
    import json
    import subprocess
    import sys

    file = tmp_path / "file"
    file.write_text("mine")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    run = tmp_path / "run"  # a run as train starts it: the resume checks read its config only
    run.mkdir()
    (run / "config.json").write_text(json.dumps(dataclasses.asdict(TrainConfig(units=8))))
    cases = {
        ("--init-from", "/no/such/run", "--out", str(tmp_path / "a")): (
            "--init-from /no/such/run is not a run directory (it does not exist)"
        ),
        ("--vocab-from", str(tmp_path), "--out", str(tmp_path / "a")): (
            f"--vocab-from {tmp_path} is not a run directory (it has no config.json)"
        ),
        ("--init-from", str(run), "--out", str(tmp_path / "a")): (
            f"--init-from {run} has no model.keras: its training did not finish"
        ),
        ("--out", str(file / "run")): f"--out {file / 'run'} is not a directory ({file} is a file)",
        ("--out", str(tmp_path / "full")): (
            f"{tmp_path / 'full'} already holds a run; pass --resume to continue it or choose "
            "another --out"
        ),
        ("--resume", "--out", str(tmp_path / "full")): (
            f"cannot resume: {tmp_path / 'full'} holds no config.json"
        ),
        ("--resume", "--units", "16", "--out", str(run)): (
            f"cannot resume {run} with --units 16: its config.json has --units 8; resuming may "
            "change --steps, --checkpoint-every, --eval-sentences, --max-minutes and "
            "--max-cpu-minutes only"
        ),
    }
    done = subprocess.run(
        [sys.executable, "-c", NO_TENSORFLOW, json.dumps([list(argv) for argv in cases])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    expected = "".join(f"2 keras-attn train: error: {message}\n" for message in cases.values())
    assert done.stdout == expected
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    assert not (tmp_path / "a").exists()


def test_field_families_are_the_built_in_families_without_an_options_dataclass():
    """`--model` with a name outside FIELD_FAMILIES looks the family up for option flags."""
    from keras_attn.models.families import MODEL_FAMILIES
    from keras_attn.training.cli import FIELD_FAMILIES

    without_options = {name for name, f in MODEL_FAMILIES.items() if f.options is None}
    assert set(FIELD_FAMILIES) == without_options
    assert "cnn-rnn" in MODEL_FAMILIES and "cnn-rnn" not in FIELD_FAMILIES


def test_a_registered_familys_options_are_flags_of_train(capsys):
    parser = build_parser()
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["train", "--model", "cnn-rnn", "--help"])
    assert exited.value.code == 0
    help_text = capsys.readouterr().out
    assert "options of model family cnn-rnn" in help_text and "--kernel-width" in help_text
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["train", "--model", "cnn-rnn", "--kernel-width", "0"])
    assert exited.value.code == 2
