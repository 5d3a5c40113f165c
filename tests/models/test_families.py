import functools
import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import keras_attn.models
from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.models import Family, GPTSteps, RNNTranslatorSteps, TransformerTranslatorSteps
from keras_attn.models.families import BUILT_IN_FAMILIES, MODEL_FAMILIES, get_family
from keras_attn.models.family_options import BUILT_IN_OPTIONS
from keras_attn.models.rnn.options import BUILDER_KEYWORDS

# The families registered by their own folder rather than through `BUILT_IN_FAMILIES`.
SELF_REGISTERED = ("cnn-rnn",)
# Step views that several folders' families decode with: each family is built to their layer
# names (`bart` and `bertsum` to the Transformer translator's, `cnn-rnn` to the RNN one's).
SHARED_STEP_VIEWS = (RNNTranslatorSteps, TransformerTranslatorSteps)


def folder(module: str) -> str:
    """`keras_attn.models.bert.bertsum` -> `bert`."""
    parts = module.split(".")
    assert parts[:2] == ["keras_attn", "models"] and len(parts) == 4, module
    return parts[2]


def defining_modules() -> dict[str, str]:
    """Family name -> the `keras_attn.models.<folder>.family` module that defines it."""
    found = {}
    for info in pkgutil.iter_modules(keras_attn.models.__path__):
        if info.ispkg:
            module = importlib.import_module(f"keras_attn.models.{info.name}.family")
            for value in vars(module).values():
                if isinstance(value, Family):
                    names = [n for n, f in BUILT_IN_FAMILIES.items() if f is value]
                    for name in names or [value.name]:
                        found[name] = module.__name__
    return found


def test_every_built_in_family_is_defined_in_a_folder_of_its_own():
    assert sorted(defining_modules()) == sorted([*BUILT_IN_FAMILIES, *SELF_REGISTERED])


@pytest.mark.parametrize("name", [*BUILT_IN_FAMILIES, *SELF_REGISTERED])
def test_a_familys_builder_step_view_and_definition_share_its_folder(name):
    family = MODEL_FAMILIES[name]
    home = folder(defining_modules()[name])
    build = family.build.func if isinstance(family.build, functools.partial) else family.build
    assert folder(build.__module__) == home
    if family.steps is not None:
        assert folder(family.steps.__module__) == home or family.steps in SHARED_STEP_VIEWS


def test_gpt_family_builds_a_language_model_and_its_cached_view():
    family = get_family("gpt")
    assert family.language_model and family.sized_steps
    language_models = {name for name, f in BUILT_IN_FAMILIES.items() if f.language_model}
    assert language_models == {"gpt", "rnn-lm"}
    assert family.builder_defaults() == {
        "num_layers": 2, "d_model": 128, "num_heads": 4, "ff_dim": 512, "dropout": 0.1,
    }  # fmt: skip
    model = family.build(20, max_length=12, num_layers=1, d_model=8, num_heads=2, ff_dim=16)
    assert model.get_layer("embedding").max_length == 12
    steps = family.decoding_steps(model, 9)
    assert isinstance(steps, GPTSteps) and steps.max_length == 9
    logits = model(np.array([[2, 5, 6]], "int32"))
    assert tuple(logits.shape) == (1, 3, 20)


@pytest.mark.parametrize("name", sorted(BUILT_IN_OPTIONS))
def test_every_option_is_a_builder_keyword_with_the_builders_default(name):
    family = MODEL_FAMILIES[name]
    assert family.options is BUILT_IN_OPTIONS[name]
    parameters = inspect.signature(family.build).parameters
    for option, default in family.builder_defaults().items():
        keyword = BUILDER_KEYWORDS.get(option, option)
        assert keyword in parameters, (name, option)
        if parameters[keyword].default is not inspect.Parameter.empty:
            assert default == parameters[keyword].default, (name, option)


@pytest.mark.parametrize("name", ["transformer", "gpt", "bert", "bertsum", "bart-classifier"])
def test_the_options_refuse_heads_that_do_not_divide_the_width(name):
    family = get_family(name)
    family.option_values({"d_model": 32, "num_heads": 4})
    family.option_values({})  # the defaults 128 / 4
    with pytest.raises(ConfigError, match="d_model=30 is not divisible by num_heads=4") as caught:
        family.option_values({"d_model": 30, "num_heads": 4})
    assert caught.value.fields == ("d_model", "num_heads")
    with pytest.raises(ConfigError, match="d_model=128 is not divisible by num_heads=3"):
        family.option_values({"num_heads": 3})  # against the default width
    get_family("rnn-attention").option_values({"units": 30})  # no heads: nothing to check


@pytest.mark.parametrize("model", ["transformer", "gpt"])
@pytest.mark.parametrize(
    "flags, message",
    [
        (["--d-model", "30", "--num-heads", "4"], "--d-model 30 is not divisible by --num-heads 4"),
        (["--num-heads", "3"], "--d-model 128 is not divisible by --num-heads 3"),
    ],
)
def test_a_bad_configuration_fails_before_the_run_directory_exists(
    tmp_path, capsys, model, flags, message
):
    out = tmp_path / "run"
    assert cli(["train", "--model", model, *flags, "--steps", "1", "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1
    assert not out.exists()
    out.mkdir()  # an existing empty --out stays empty
    assert cli(["train", "--model", model, *flags, "--steps", "1", "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert list(out.iterdir()) == []


def test_gpt_takes_no_translator_options(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli(["train", "--model", "gpt", "--normalize-first", "--out", str(out)]) == 2
    assert "--normalize-first does not apply to --model gpt" in capsys.readouterr().err
    assert not out.exists()


def test_the_old_module_name_still_imports_and_warns():
    import importlib
    import sys

    from keras_attn.models import families

    sys.modules.pop("keras_attn.models.registry", None)
    with pytest.warns(DeprecationWarning, match="keras_attn.models.families"):
        old = importlib.import_module("keras_attn.models.registry")
    assert old.get_family is families.get_family and old.MODEL_FAMILIES is MODEL_FAMILIES
