"""Initializer helpers shared by the layers and the score objects."""

from __future__ import annotations

import keras


def clone_initializer(initializer):
    """A fresh initializer of the same config, for one weight.

    Keras 3 fixes the seed of an unseeded initializer instance when the instance is made, so one
    instance used for several weights of the same shape gives them identical values (a
    multi-head layer whose query and key kernels start equal, for example). Every `add_weight`
    in keras_attn passes its initializer through here; an explicitly seeded initializer keeps
    its seed, as in Keras' own layers.
    """
    if isinstance(initializer, keras.initializers.Initializer):
        return initializer.__class__.from_config(initializer.get_config())
    return initializer
