"""`import keras_attn` gives every subpackage, lazily; every symbol marked public with
`keras_attn_export` is reachable at the path it declares."""

import importlib
import inspect
import json
import pkgutil
import subprocess
import sys

import keras
import pytest

import keras_attn

SUBPACKAGES = (
    "decoding", "distributions", "export", "layers", "models", "ops", "scores", "serving",
    "testing", "text", "training", "vision",
)  # fmt: skip


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_every_subpackage_is_an_attribute_of_the_package(name):
    assert getattr(keras_attn, name) is importlib.import_module(f"keras_attn.{name}")
    assert name in dir(keras_attn)


def test_all_names_the_subpackages():
    assert sorted(keras_attn.__all__) == sorted(SUBPACKAGES)
    assert keras_attn.__version__


def test_an_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'keras_attn' has no attribute 'layer'"):
        keras_attn.layer  # noqa: B018


def test_import_keras_attn_imports_no_subpackage_keras_or_tensorflow():
    probe = (
        "import json, sys; import keras_attn; "
        "print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] in "
        "('keras_attn', 'keras', 'tensorflow', 'jax', 'torch'))))"
    )
    output = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert json.loads(output) == ["keras_attn", "keras_attn._serializables"]


@pytest.mark.parametrize("keras_first", [False, True])
def test_keras_reads_a_saved_model_after_a_plain_import_keras_attn(tmp_path, keras_first):
    """Saved here, loaded in a child process that imports nothing of keras_attn but the package."""
    from keras_attn.layers import BidirectionalEncoder, TokenPooling

    inputs = keras.Input((None, 4))
    memory, _, _ = BidirectionalEncoder(3)(inputs)
    model = keras.Model(inputs, TokenPooling("last")(memory))
    path = tmp_path / "model.keras"
    model.save(path)
    imports = "import keras, keras_attn" if keras_first else "import keras_attn, keras"
    probe = (
        f"{imports}; print(type(keras.saving.load_model({str(path)!r}).layers[1]).__name__); "
        "print(*(keras.saving.get_registered_object(f'keras_attn>{name}').__name__ "
        "for name in ('ShowAttendTellDecoder', 'HalvingSchedule')))"
    )
    output = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert output.returncode == 0, output.stderr[-2000:]
    assert output.stdout.split() == [
        "BidirectionalEncoder", "ShowAttendTellDecoder", "HalvingSchedule"
    ]  # fmt: skip


@pytest.mark.parametrize(
    "first", ["keras_attn.models.rnn.attention", "keras_attn.models.cnn_rnn.model"]
)
def test_a_model_module_imported_first_imports_and_registration_follows(first):
    """A model module that imports Keras first must not meet the model modules registration
    imports half built (`keras_attn._serializables` waits while one is being imported)."""
    probe = (
        f"import importlib, keras_attn; importlib.import_module({first!r}); "
        "import keras, keras_attn.models.families; "
        "print(keras.saving.get_registered_object('keras_attn>ConvolutionalEncoder').__name__)"
    )
    output = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert output.returncode == 0, output.stderr[-2000:]
    assert output.stdout.split() == ["ConvolutionalEncoder"]


def exported_symbols():
    found = {}
    for info in pkgutil.walk_packages(keras_attn.__path__, prefix="keras_attn."):
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module):
            for path in getattr(value, "_keras_attn_api", ()):
                if getattr(value, "__module__", "") == info.name:
                    found[path] = value
    return found


def resolve(path):
    module_path, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module_path), name)


def test_every_exported_symbol_resolves_at_its_public_path():
    symbols = exported_symbols()
    assert "keras_attn.layers.Attention" in symbols
    missing = [path for path, value in symbols.items() if resolve_or_none(path) is not value]
    assert not missing, f"exported but not reachable: {sorted(missing)}"


def resolve_or_none(path):
    try:
        return resolve(path)
    except (ImportError, AttributeError):
        return None


def test_every_exported_class_with_a_config_is_registered():
    for path, value in exported_symbols().items():
        if isinstance(value, type) and hasattr(value, "get_config"):
            assert keras.saving.get_registered_object(f"keras_attn>{value.__name__}") is value, path
