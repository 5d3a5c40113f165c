"""Every symbol marked public with `keras_attn_export` is reachable at the path it declares."""

import importlib
import inspect
import pkgutil

import keras

import keras_attn


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
