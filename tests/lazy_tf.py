"""`tf`, TensorFlow imported the first time a test uses it.

The tests marked `every_backend` also run under JAX and PyTorch, where TensorFlow need not be
installed (a GPU machine with JAX or torch but no TensorFlow wheel). Their modules import `tf`
from here, so only the tests that use TensorFlow (marked `tensorflow_only`, skipped on the other
backends) import it."""

import importlib
from types import ModuleType


class _LazyTensorFlow(ModuleType):
    def __getattr__(self, name: str):
        return getattr(importlib.import_module("tensorflow"), name)


tf = _LazyTensorFlow("tensorflow")
