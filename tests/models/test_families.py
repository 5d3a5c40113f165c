import numpy as np
import pytest

from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.models import GPTSteps
from keras_attn.models.families import MODEL_FAMILIES, get_family


def test_gpt_family_builds_a_language_model_and_its_cached_view():
    family = get_family("gpt")
    assert family.language_model and family.sized_steps
    assert not any(f.language_model for name, f in MODEL_FAMILIES.items() if name != "gpt")
    assert family.builder_defaults() == {
        "num_layers": 2, "d_model": 128, "num_heads": 4, "ff_dim": 512, "dropout": 0.1,
    }  # fmt: skip
    model = family.build(20, max_length=12, num_layers=1, d_model=8, num_heads=2, ff_dim=16)
    assert model.get_layer("embedding").max_length == 12
    steps = family.decoding_steps(model, 9)
    assert isinstance(steps, GPTSteps) and steps.max_length == 9
    logits = model(np.array([[2, 5, 6]], "int32"))
    assert tuple(logits.shape) == (1, 3, 20)


@pytest.mark.parametrize("name", ["transformer", "gpt"])
def test_check_rejects_heads_that_do_not_divide_the_width(name):
    family = get_family(name)
    family.check({"d_model": 32, "num_heads": 4})
    family.check({})  # the defaults 128 / 4
    with pytest.raises(ConfigError, match="d_model=30 is not divisible by num_heads=4") as caught:
        family.check({"d_model": 30, "num_heads": 4})
    assert caught.value.fields == ("d_model", "num_heads")
    with pytest.raises(ConfigError, match="d_model=128 is not divisible by num_heads=3"):
        family.check({"num_heads": 3})  # against the builder's default width
    get_family("rnn-attention").check({"units": 30})  # no heads: nothing to check


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
