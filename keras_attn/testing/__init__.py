"""Test helpers shared by every keras_attn layer test (see `harness` for the contract).

The public names are those of `keras_attn.testing.harness`, re-exported with its `__all__`."""

from keras_attn.testing.harness import *  # noqa: F403
from keras_attn.testing.harness import __all__ as __all__
