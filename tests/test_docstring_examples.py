"""Every `Example:` in a keras_attn docstring runs, and its printed values are checked."""

import doctest
import importlib
import pkgutil

import pytest

import keras_attn

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(keras_attn.__path__, prefix="keras_attn.")
    if not info.name.endswith(".__main__")
)


def test_modules_found():
    assert "keras_attn.layers.attention.attention" in MODULES
    assert len(MODULES) > 30


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name, globs=dict(vars(module))):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} docstring example(s) failed in {name}"
