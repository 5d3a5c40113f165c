"""`keras-attn train`'s flags come from `TrainConfig`'s fields and from the fields of the model
family's options dataclass."""

import dataclasses

import pytest

from keras_attn.cli import build_parser
from keras_attn.training.config import TrainConfig

# The flags and defaults `keras-attn train` has always had (besides --out, required).
DEFAULTS = {
    "model": "rnn-attention", "corpus": "synthetic", "steps": 2000, "batch_size": 64,
    "learning_rate": None, "warmup_steps": None, "schedule": None, "decay_start": None,
    "decay_every": None, "optimizer": "adam", "clipnorm": 5.0, "weight_decay": 0.0,
    "label_smoothing": 0.0,
    "mixed_precision": "auto", "seed": 0, "max_length": 80, "vocab_size": 2000,
    "checkpoint_every": 200, "eval_sentences": 1000, "eval_every": 0, "max_minutes": None,
    "max_cpu_minutes": None, "distribute": "none", "resume": False, "quiet": False,
    "init_from": None, "vocab_from": None, "train_examples": None, "examples_per_class": None,
    "encoder_learning_rate": None, "encoder_warmup_steps": None, "side": None, "mask_rate": None,
    "noises": None, "scheduled_sampling": None, "sampling_constant": None, "sampling_floor": None,
    "model_file": None, "options": None,
}  # fmt: skip
# The options of the default model family, rnn-attention, and their defaults: flags too.
OPTION_DEFAULTS = {
    "embedding_dim": 128, "units": 256, "cell": "lstm", "gru_reset_after": True, "dropout": 0.1,
    "num_layers": 1, "encoder_direction": "bi", "reverse_source": False, "score": "additive",
}  # fmt: skip


def parse(*flags):
    return build_parser().parse_args(["train", "--out", "run", *flags])


def test_flags_and_defaults():
    args = vars(parse())
    assert {k: v for k, v in args.items() if k in DEFAULTS} == DEFAULTS
    options = {f"options.{name}": value for name, value in OPTION_DEFAULTS.items()}
    assert {k: v for k, v in args.items() if k in options} == options
    assert set(args) == {
        *DEFAULTS, *options, "out", "command", "func", "flags", "given", "family_options",
        "refused",
    }  # fmt: skip
    fields = {field.name: field.default for field in dataclasses.fields(TrainConfig)}
    assert fields == {k: v for k, v in DEFAULTS.items() if k in fields}


def test_flags_take_their_field_types_and_choices(capsys):
    args = parse("--batch-size", "8", "--learning-rate", "0.5", "--model", "rnn-luong",
                 "--no-input-feeding", "--score", "dot", "--optimizer", "sgd")  # fmt: skip
    assert (args.batch_size, args.learning_rate) == (8, 0.5)
    assert getattr(args, "options.input_feeding") is False
    assert (getattr(args, "options.score"), args.optimizer) == ("dot", "sgd")
    assert getattr(parse("--model", "transformer", "--normalize-first"), "options.normalize_first")
    for flag, value in (("--optimizer", "rmsprop"), ("--cell", "rnn"), ("--steps", "1.5")):
        with pytest.raises(SystemExit):
            parse(flag, value)
        assert flag in capsys.readouterr().err


def test_help_names_other_options_by_their_flags(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--model", "rnn-luong", "--help"])
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
    from keras_attn.models.rnn import options
    from keras_attn.scores import SCORES
    from keras_attn.training import config, optimizers, scheduled_sampling, schedules, strategy
    from keras_attn.training.cli import STRATEGIES

    assert options.SCORES == tuple(sorted(SCORES))
    assert options.DISTRIBUTIONS == tuple(sorted(DISTRIBUTIONS))
    assert options.ATTENTIONS == tuple(ATTENTIONS)
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
        "--eval-every, --max-minutes and --max-cpu-minutes (limits of this call only), --quiet and "
        "--distribute may change; any other flag must repeat the run's value"
    ) in unwrapped


def test_the_flags_given_are_told_from_the_defaults():
    assert parse().given == ()
    args = parse("--steps", "2000", "--model", "rnn-luong", "--no-input-feeding", "--units", "8",
                 "--steps", "5")  # fmt: skip
    assert sorted(set(args.given)) == ["model", "options.input_feeding", "options.units", "steps"]
    assert (args.steps, getattr(args, "options.units")) == (5, 8)
    assert getattr(args, "options.input_feeding") is False


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
    (run / "config.json").write_text(
        json.dumps(dataclasses.asdict(TrainConfig(options={"units": 8})))
    )
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
            "change --steps, --checkpoint-every, --eval-sentences, --eval-every, --max-minutes "
            "and --max-cpu-minutes only"
        ),
        ("--d-model", "64", "--out", str(tmp_path / "a")): (
            "--d-model does not apply to --model rnn-attention (its options: --embedding-dim, "
            "--units, --cell, --gru-reset-after, --dropout, --num-layers, --encoder-direction, "
            "--reverse-source, --score)"
        ),
        ("--model", "transformer", "--units", "8", "--out", str(tmp_path / "a")): (
            "--units does not apply to --model transformer (its options: --num-layers, "
            "--d-model, --num-heads, --ff-dim, --dropout, --normalize-first)"
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


def test_the_options_table_is_the_built_in_families_options():
    """`--model` reads a built-in family's options from `BUILT_IN_OPTIONS`, without importing
    the families: the table must name each family's own options dataclass."""
    from keras_attn.models.families import BUILT_IN_FAMILIES, MODEL_FAMILIES
    from keras_attn.models.family_options import BUILT_IN_OPTIONS

    assert set(BUILT_IN_OPTIONS) == {*BUILT_IN_FAMILIES, "cnn-rnn"}
    for name, options in BUILT_IN_OPTIONS.items():
        assert MODEL_FAMILIES[name].options is options, name


# Prints the `keras-attn train ... --help` text of argv[1:], and whether Keras or TensorFlow
# were imported.
HELP = r"""
import contextlib, io, sys

from keras_attn.cli import main

out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(["train", *sys.argv[1:], "--help"])
    except SystemExit:
        pass
print(out.getvalue())
print("imported:", sorted({"tensorflow", "keras"} & set(sys.modules)))
"""


@pytest.mark.parametrize(
    "flags,expected",
    [
        ([], ["options of model family rnn-attention", "--score", "train --model M --help"]),
        (["--model", "transformer"], ["options of model family transformer", "--d-model"]),
        (["--model", "bertsum"], ["--decoder-layers", "default: as many as the encoder"]),
    ],
)
def test_help_lists_the_run_options_and_the_familys_without_tensorflow(flags, expected):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", HELP, *flags], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    help_text = " ".join(done.stdout.split())
    assert "--batch-size" in help_text and "--learning-rate" in help_text
    for words in expected:
        assert words in help_text
    assert "--units" not in help_text or not flags  # another family's options are not listed
    assert done.stdout.rstrip().endswith("imported: []")


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
