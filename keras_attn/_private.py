"""Every use of a private Keras or TensorFlow API in keras_attn, in one place.

Each item below has no public equivalent in the Keras and TensorFlow versions keras_attn
supports. `check_private_apis()` verifies that each one is still there; its test fails with a
message naming the installed versions when an upgrade removes or renames one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import keras
from keras.src import backend as keras_backend
from keras.src.backend.common import global_state

# The two maps of Keras' `serialization_lib.ObjectSharingScope`, which `keras.saving.load_model`
# holds open while it rebuilds a model.
_SHARING_MAPS = ("shared_objects/id_to_obj_map", "shared_objects/id_to_config_map")
# The Keras (TensorFlow backend) optimizer method that sums the replicas' gradients in `apply`.
_ALL_REDUCE_METHOD = "_all_reduce_sum_gradients"


@contextlib.contextmanager
def object_sharing_paused() -> Iterator[None]:
    """Set Keras' object-sharing maps aside inside the block, and put them back after it.

    Inside `keras.saving.load_model`, Keras records every serialized object by `id()` so that
    shared objects are rebuilt once; a layer that serializes and deserializes a temporary
    object while the model is rebuilt (`keras.layers.Bidirectional` copying its layer) can then
    get back an unrelated object that had the same `id()`.
    """
    saved = {name: global_state.get_global_attribute(name) for name in _SHARING_MAPS}
    for name in _SHARING_MAPS:
        global_state.set_global_attribute(name, None)
    try:
        yield
    finally:
        for name, value in saved.items():
            global_state.set_global_attribute(name, value)


class SummedGradientsMixin:
    """Mixin for a Keras optimizer that takes gradients already summed over the replicas.

    Under a `tf.distribute` strategy, Keras' TensorFlow optimizer clips (`global_clipnorm`) each
    replica's gradient and then sums them, so the clipping threshold would apply to a
    per-replica norm. A train step that sums first (`ReplicaContext.all_reduce`) clips the
    global gradient, as on one device; this mixin skips Keras' second sum.
    """

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)


def backend_rnn(step_function, inputs, initial_states, **kwargs):
    """Keras' backend loop of `keras.layers.RNN` (`keras.src.backend.rnn`), same arguments.

    For an RNN layer whose `inner_loop` changes the states it carries; Keras exports no loop
    with `keras.layers.RNN`'s masking, `go_backwards` and `unroll`.
    """
    return keras_backend.rnn(step_function, inputs, initial_states, **kwargs)


def check_private_apis() -> None:
    """Raise RuntimeError naming the Keras and TensorFlow versions if an API used here is gone."""
    import tensorflow as tf

    missing = [
        f"keras.src.backend.common.global_state.{name}"
        for name in ("get_global_attribute", "set_global_attribute")
        if not callable(getattr(global_state, name, None))
    ]
    if not callable(getattr(keras_backend, "rnn", None)):
        missing.append("keras.src.backend.rnn")
    from keras.src.saving import serialization_lib

    with serialization_lib.ObjectSharingScope():
        for name in _SHARING_MAPS:
            if not isinstance(global_state.get_global_attribute(name), dict):
                missing.append(f"the object-sharing map {name!r}")
    if not callable(getattr(keras.optimizers.Adam, _ALL_REDUCE_METHOD, None)):
        missing.append(f"keras.optimizers.Optimizer.{_ALL_REDUCE_METHOD}")
    if missing:
        raise RuntimeError(
            f"Keras {keras.__version__} / TensorFlow {tf.__version__} no longer provide "
            f"{', '.join(missing)}, which keras_attn/_private.py relies on"
        )
