"""The private Keras/TensorFlow APIs of `keras_attn._private` are still there.

If one of these fails after an upgrade, its message names the Keras and TensorFlow versions and
the API that went away; `keras_attn/_private.py` is the only module to adapt.
"""

import ast
from pathlib import Path

import keras
import numpy as np

import keras_attn
from keras_attn import _private
from keras_attn.training.optimizers import OPTIMIZERS


def test_every_private_api_is_still_there():
    _private.check_private_apis()


def test_no_other_module_imports_private_keras_or_tensorflow_modules():
    private = ("keras.src", "tensorflow.python", "tensorflow.core.framework._")
    offenders = []
    for path in Path(keras_attn.__file__).parent.rglob("*.py"):
        if path.name == "_private.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith(private)]
        if "op_def_registry" in path.read_text(encoding="utf-8"):
            offenders.append(f"{path.name}: op_def_registry")
    assert offenders == []


def test_object_sharing_is_paused_and_restored():
    from keras.src.backend.common import global_state
    from keras.src.saving import serialization_lib

    with serialization_lib.ObjectSharingScope():
        before = global_state.get_global_attribute("shared_objects/id_to_obj_map")
        with _private.object_sharing_paused():
            assert global_state.get_global_attribute("shared_objects/id_to_obj_map") is None
        assert global_state.get_global_attribute("shared_objects/id_to_obj_map") is before


def test_summed_gradients_skip_the_optimizers_own_sum():
    """One replica: the mixin's optimizer steps exactly as the plain Keras optimizer does."""
    for name, plain in (("adam", keras.optimizers.Adam), ("sgd", keras.optimizers.SGD)):
        ours, theirs = keras.Variable(np.ones(3, "float32")), keras.Variable(np.ones(3, "float32"))
        gradient = np.array([0.5, -1.0, 2.0], "float32")
        OPTIMIZERS[name](0.1, global_clipnorm=1.0).apply([gradient], [ours])
        plain(0.1, global_clipnorm=1.0).apply([gradient], [theirs])
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
