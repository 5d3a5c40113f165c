"""The saving checks: `.keras` save/load and SavedModel export serve the same outputs."""

from __future__ import annotations

import os
import tempfile

import keras

from keras_attn.testing.assertions import assert_outputs_close, fail
from keras_attn.testing.spec import LayerSpec

__all__ = ["check_keras_save_load", "check_saved_model"]


def check_keras_save_load(spec: LayerSpec, *, atol: float = 1e-6, rtol: float = 1e-6) -> None:
    """A functional model wrapping the layer, saved as `.keras` and loaded without
    `custom_objects`, gives the same outputs and holds a layer of the same class."""
    check = "keras_save_load"
    model, _ = spec.build_model(spec.make(), return_weights=spec.returns_weights)
    data = spec.model_inputs()
    expected = model(data)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
    if not any(type(layer) is spec.layer_cls for layer in loaded.layers):
        fail(check, spec, "the loaded model holds no layer of this class")
    assert_outputs_close(check, spec, "loaded .keras model", expected, loaded(data), atol, rtol)


def check_saved_model(spec: LayerSpec, *, atol: float = 1e-6, rtol: float = 1e-6) -> None:
    """`model.export(format="tf_saved_model")`, reloaded with `tf.saved_model.load`, serves the
    same outputs through both the `serve` endpoint and the `serving_default` signature.

    The model returns the layer's outputs as a flat list: SavedModel signatures only take a
    tensor, a flat sequence or a flat dict of tensors, whatever the layer's nesting.
    """
    import tensorflow as tf  # here: the other checks run on backends without TensorFlow

    check = "saved_model"
    model, _ = spec.build_model(
        spec.make(), return_weights=spec.returns_weights, flatten_outputs=True
    )
    data = spec.model_inputs()
    expected = model(data)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "saved_model")
        model.export(path, format="tf_saved_model", verbose=False)
        reloaded = tf.saved_model.load(path)
        tensors = {name: tf.constant(value) for name, value in data.items()}
        assert_outputs_close(
            check,
            spec,
            "SavedModel `serve` endpoint",
            expected,
            reloaded.serve(tensors),
            atol,
            rtol,
        )
        signature = reloaded.signatures["serving_default"]
        served = signature(**tensors)
        ordered = [served[key] for key in sorted(served, key=_output_key_order)]
        assert_outputs_close(
            check, spec, "SavedModel serving_default signature", expected, ordered, atol, rtol
        )


def _output_key_order(key: str) -> tuple:
    """Sort key of a signature output name: `output_10` after `output_2`."""
    prefix, _, index = key.rpartition("_")
    return (prefix, int(index)) if index.isdigit() else (key, -1)
