"""`keras_attn.models.Family`: kinds, options from a dataclass, their flags and checks, and
`register_family`."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from keras_attn.cli import build_parser
from keras_attn.errors import ConfigError
from keras_attn.models import Family, ModelFamily, get_family, load_model_file, register_family
from keras_attn.models import families as families_module
from keras_attn.models.family import MODEL_FAMILIES
from keras_attn.training.config import TrainConfig, resumed_config, with_family_tuning


@dataclasses.dataclass(frozen=True)
class Options:
    width: int = dataclasses.field(default=16, metadata={"help": "state width", "min": 2})
    rate: float = dataclasses.field(default=0.25, metadata={"help": "a rate", "min": 0.0})
    mode: str = dataclasses.field(default="a", metadata={"help": "mode", "choices": ("a", "b")})
    tied: bool = dataclasses.field(default=False, metadata={"help": "tie the embeddings"})


def build(source_vocabulary_size, target_vocabulary_size, **options):
    return (source_vocabulary_size, target_vocabulary_size, options)


@pytest.fixture
def registry():
    """`MODEL_FAMILIES` as it was before the test, afterwards."""
    saved = dict(MODEL_FAMILIES)
    yield MODEL_FAMILIES
    MODEL_FAMILIES.clear()
    MODEL_FAMILIES.update(saved)


# A model file registering one translator family named NAME with `Options`' fields.
MODEL_FILE = textwrap.dedent(
    """
    import dataclasses

    from keras_attn.models import Family, RNNTranslatorSteps, register_family


    @dataclasses.dataclass(frozen=True)
    class Options:
        units: int = dataclasses.field(default=16, metadata={{"help": "width 100%", "min": 2}})
        rate: float = dataclasses.field(default=0.25, metadata={{"help": "a rate"}})
        mode: str = dataclasses.field(default="a", metadata={{"choices": ("a", "b")}})
        tied: bool = dataclasses.field(default=False, metadata={{"help": "tie them"}})


    register_family(
        Family(name="{name}", kind="translator", options=Options, build=print,
               steps=RNNTranslatorSteps, learning_rate=0.01)
    )
    """
)


def model_file(tmp_path, name="tiny-family", text=MODEL_FILE):
    path = tmp_path / f"{name}.py"
    path.write_text(text.format(name=name))
    return path


RNN = (3e-3, 100, "cosine")
TRANSFORMER = (1e-3, 100, "cosine")
FINE_TUNING = (5e-4, 30, "cosine")


@pytest.mark.parametrize(
    "name, kind, task, tuning",
    [
        ("rnn-attention", "translator", "translation", RNN),
        ("transformer", "translator", "translation", TRANSFORMER),
        ("bart-translator", "translator", "translation", FINE_TUNING),
        ("gpt", "generator", "language_model", TRANSFORMER),
        ("rnn-lm", "generator", "language_model", RNN),
        ("show-attend-tell", "captioner", "captioning", (3e-3, 100, "cosine")),
        ("text-cnn", "classifier", "classification", (1e-3, 0, "cosine")),
        ("bert-classifier", "classifier", "classification", FINE_TUNING),
        ("bert-tagger", "tagger", "tagging", FINE_TUNING),
        ("bart-tagger", "tagger", "tagging", FINE_TUNING),
        ("bert", "pretraining", "masked_lm", TRANSFORMER),
        ("bart", "pretraining", "denoising", TRANSFORMER),
        ("vqa-coattention", "answerer", "question_answering", (3e-3, 50, "cosine")),
    ],
)
def test_built_in_families_have_a_name_a_kind_a_task_and_their_tuning(name, kind, task, tuning):
    family = get_family(name)
    assert (family.name, family.kind, family.task) == (name, kind, task)
    assert family.exportable == (kind != "pretraining")
    # The schedules of the tuned runs in docs/results.md (experiments/quality.py, pretraining.py).
    assert family.training_defaults() == dict(
        zip(("learning_rate", "warmup_steps", "schedule"), tuning, strict=True)
    )


def test_the_old_names_are_the_same_objects():
    assert ModelFamily is Family is families_module.ModelFamily
    assert families_module.MODEL_FAMILIES is MODEL_FAMILIES
    assert families_module.get_family is get_family


def test_every_built_in_family_declares_its_options_as_a_dataclass():
    for name, family in families_module.BUILT_IN_FAMILIES.items():
        assert dataclasses.is_dataclass(family.options), name
        assert family.option_names and family.option_values() == family.builder_defaults()


def test_a_kind_gives_the_task_and_a_bad_kind_or_task_is_refused():
    family = Family(name="x", kind="generator", build=build)
    assert (family.task, family.language_model) == ("language_model", True)
    assert Family(name="x", task="tagging", build=build).kind == "tagger"
    with pytest.raises(ConfigError, match="Expected kind in .*Received: kind='parser'") as caught:
        Family(name="x", kind="parser", build=build)
    assert caught.value.fields == ("kind",)
    with pytest.raises(ConfigError, match="task='masked_lm' or task='denoising'"):
        Family(name="x", kind="pretraining", build=build)
    with pytest.raises(ConfigError, match="task='tagging' is not a task of kind='translator'"):
        Family(name="x", kind="translator", task="tagging", build=build)
    assert Family(name="x", kind="pretraining", task="denoising", build=build).exportable is False


def test_option_values_fill_defaults_and_check_type_choices_and_least_value():
    family = Family(name="x", kind="translator", options=Options, build=build)
    assert family.option_names == ("width", "rate", "mode", "tied")
    assert family.option_values({"width": 4, "rate": 1}) == {
        "width": 4, "rate": 1.0, "mode": "a", "tied": False,
    }  # fmt: skip
    assert isinstance(family.option_values({"rate": 1})["rate"], float)
    refused = {
        "width must be >= 2, got 1": {"width": 1},
        "width must be a int, got 2.5": {"width": 2.5},
        "width must be a int, got True": {"width": True},
        "rate must be a finite number >= 0, got -0.5": {"rate": -0.5},
        "rate must be a finite number >= 0, got nan": {"rate": float("nan")},
        "mode must be one of a, b, got 'c'": {"mode": "c"},
        "tied must be a bool, got 1": {"tied": 1},
    }
    for message, given in refused.items():
        with pytest.raises(ConfigError) as caught:
            family.option_values(given)
        assert str(caught.value) == message
        assert caught.value.fields == tuple(given)
        assert caught.value.in_terms_of(lambda name: "--" + name).startswith(
            f"--{next(iter(given))}"
        )
    with pytest.raises(ConfigError, match="depth does not apply to model='x'"):
        family.option_values({"depth": 3})


def test_an_options_type_no_flag_can_carry_is_refused():
    @dataclasses.dataclass
    class NoDefault:
        width: int

    @dataclasses.dataclass
    class ListOption:
        sizes: list = dataclasses.field(default_factory=list)

    @dataclasses.dataclass
    class Misspelt:
        width: int = dataclasses.field(default=2, metadata={"minimum": 1})

    cases = {
        NoDefault: "option width of NoDefault has no default",
        ListOption: "option sizes of ListOption has type <class 'list'>",
        Misspelt: "option width of Misspelt has metadata minimum; expected keys: help, choices",
        dict: "options must be a dataclass type",
    }
    for options, message in cases.items():
        with pytest.raises(ConfigError, match=message):
            Family(name="x", kind="translator", options=options, build=build)


def test_register_family_adds_a_family_and_refuses_a_taken_name(registry):
    family = Family(name="tiny-translator", kind="translator", options=Options, build=build)
    assert register_family(family) is family
    assert get_family("tiny-translator") is family
    with pytest.raises(ConfigError, match="'tiny-translator' is registered already") as caught:
        register_family(Family(name="tiny-translator", kind="generator", build=build))
    assert caught.value.fields == ("name",)
    assert get_family("tiny-translator") is family
    with pytest.raises(ConfigError, match="'rnn-attention' is registered already"):
        register_family(Family(name="rnn-attention", build=build))
    with pytest.raises(ConfigError, match="needs a name"):
        register_family(Family(kind="translator", build=build))
    with pytest.raises(ConfigError, match="takes a keras_attn.models.Family, got 42"):
        register_family(42)
    with pytest.raises(ConfigError, match="takes a keras_attn.models.Family, got None"):
        register_family("x")
    old_form = register_family("tiny-old", Family(build=build))  # register_family(name, family)
    assert (old_form.name, get_family("tiny-old").kind) == ("tiny-old", "translator")
    with pytest.raises(ConfigError, match="Unknown model 'tiny-new'"):
        get_family("tiny-new")


def test_a_model_file_registers_once_and_a_bad_one_registers_nothing(registry, tmp_path):
    path = model_file(tmp_path)
    (family,) = load_model_file(path)
    assert family is get_family("tiny-family") and family.learning_rate == 0.01
    copy = tmp_path / "copy.py"
    copy.write_bytes(path.read_bytes())
    assert load_model_file(copy) == (family,)  # the same bytes: not run again
    with pytest.raises(ConfigError, match=f"model_file {tmp_path / 'none.py'} does not exist"):
        load_model_file(tmp_path / "none.py")
    empty = tmp_path / "empty.py"
    empty.write_text("import keras_attn\n")
    with pytest.raises(ConfigError, match="registers no model family: call keras_attn.models"):
        load_model_file(empty)
    twice = tmp_path / "twice.py"
    twice.write_text(MODEL_FILE.format(name="tiny-twice") * 2)
    with pytest.raises(ConfigError, match="'tiny-twice' is registered already") as caught:
        load_model_file(twice)
    assert caught.value.fields == ("model_file",)
    assert "tiny-twice" not in MODEL_FAMILIES  # the first registration is undone too


def parse(*flags):
    return build_parser().parse_args(["train", "--out", "run", *flags])


def test_the_options_of_a_model_files_family_are_flags(registry, tmp_path, capsys):
    path = model_file(tmp_path)
    args = parse("--model-file", str(path), "--units", "8", "--mode", "b", "--tied")
    assert (args.model, args.model_file, args.family_options) == (
        "tiny-family", str(path), ("units", "rate", "mode", "tied"),
    )  # fmt: skip
    options = {name: vars(args)[f"options.{name}"] for name in args.family_options}
    assert options == {"units": 8, "rate": 0.25, "mode": "b", "tied": True}
    assert "options.score" not in vars(args)  # the file's family's options only
    assert getattr(parse("--units", "8"), "options.score") == "additive"  # without the file

    with pytest.raises(SystemExit):
        parse("--model-file", str(path), "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert f"options of model family tiny-family ({path}):" in text
    assert "--units UNITS width 100% (>= 2; default: 16)" in text
    assert "--mode {a,b} (default: a)" in text and "--tied, --no-tied tie them" in text

    mistakes = {
        ("--width", "3"): "unrecognized arguments: --width 3",
        ("--mode", "c"): "argument --mode: invalid choice: 'c' (choose from 'a', 'b')",
        ("--units", "many"): "argument --units: invalid int value: 'many'",
        ("--model", "gpt"): f"--model gpt is not a family of --model-file {path}",
    }
    for flags, message in mistakes.items():
        with pytest.raises(SystemExit) as caught:
            parse("--model-file", str(path), *flags)
        error = capsys.readouterr().err
        assert caught.value.code == 2 and error.count("\n") == 1
        assert error.startswith(f"keras-attn train: error: {message}")


def test_an_option_that_would_hide_a_training_flag_is_refused(registry, tmp_path, capsys):
    text = MODEL_FILE.replace("units: int", "steps: int")
    path = model_file(tmp_path, "tiny-steps", text)
    with pytest.raises(SystemExit):
        parse("--model-file", str(path))
    assert capsys.readouterr().err == (
        f"keras-attn train: error: option steps of model family tiny-steps ({path}) would hide "
        "--steps of keras-attn train: rename it\n"
    )


def test_a_model_file_with_two_families_needs_model(registry, tmp_path, capsys):
    path = tmp_path / "two.py"
    path.write_text(MODEL_FILE.format(name="tiny-a") + MODEL_FILE.format(name="tiny-b"))
    with pytest.raises(SystemExit):
        parse("--model-file", str(path))
    assert "defines the model families tiny-a, tiny-b: choose one with --model" in (
        capsys.readouterr().err
    )
    assert parse("--model-file", str(path), "--model", "tiny-b").model == "tiny-b"


def test_config_checks_options_and_takes_the_familys_schedule(registry, tmp_path):
    path = model_file(tmp_path)
    config = TrainConfig(model="tiny-family", model_file=str(path), options={"units": 1})
    with pytest.raises(ConfigError, match="units must be >= 2, got 1"):
        config.validate()  # loads the model file: the family is not registered yet
    config = dataclasses.replace(config, options={"units": 4})
    config.validate()
    assert config.model_hyperparameters() == {
        "units": 4, "rate": 0.25, "mode": "a", "tied": False,
    }  # fmt: skip
    with pytest.raises(ConfigError, match="score does not apply to model='tiny-family' \\(its "
                       "options: units, rate, mode, tied\\)"):  # fmt: skip
        dataclasses.replace(config, options={"score": "dot"}).validate()
    with pytest.raises(ConfigError, match="rate does not apply to model='rnn-attention'"):
        TrainConfig(model="rnn-attention", options={"units": 4, "rate": 0.5}).validate()

    tuned = with_family_tuning(dataclasses.replace(config, warmup_steps=7), config.family())
    assert (tuned.learning_rate, tuned.warmup_steps, tuned.schedule) == (0.01, 7, "cosine")
    # Not given, a tuning field is the family's: a bad one is refused as the run would take it.
    warm = dataclasses.replace(get_family("transformer"), schedule="inverse-sqrt")
    with pytest.raises(ConfigError, match="warmup_steps must be >= 1 with schedule='inverse-sqrt'"):
        TrainConfig(model="transformer", warmup_steps=0).validate(warm)
    TrainConfig(model="transformer", warmup_steps=0).validate()  # its own schedule: cosine


def test_a_resumed_run_refuses_an_option_that_differs_by_name():
    saved = TrainConfig(model="tiny-family", options={"units": 4, "mode": "a"})
    same = dataclasses.replace(saved, options={"units": 4, "mode": "a"}, steps=5)
    assert resumed_config(saved, same, "run").steps == 5
    with pytest.raises(ConfigError) as caught:
        resumed_config(saved, dataclasses.replace(saved, options={"units": 8, "mode": "a"}), "run")
    assert str(caught.value).startswith(
        "cannot resume run with units=8: its config.json has units=4"
    )
    assert "units" in caught.value.fields
