"""The call check: symbolic and eager calls agree; the weights flag only adds weights."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import keras

from keras_attn.testing.assertions import assert_outputs_close, fail
from keras_attn.testing.comparison import describe, dtype_name, flat, shapes_compatible
from keras_attn.testing.masking_check import weights_with_masks
from keras_attn.testing.spec import LayerSpec

__all__ = ["check_call"]


def _flatten_shape_structure(shape_structure: Any) -> list:
    if isinstance(shape_structure, tuple) and all(
        d is None or isinstance(d, int) for d in shape_structure
    ):
        return [shape_structure]
    if isinstance(shape_structure, Mapping):
        return [
            s
            for key in sorted(shape_structure)
            for s in _flatten_shape_structure(shape_structure[key])
        ]
    return [s for item in shape_structure for s in _flatten_shape_structure(item)]


def check_call(
    spec: LayerSpec,
    *,
    expected_output_shape: Any = None,
    atol: float = 1e-6,
    rtol: float = 1e-6,
) -> None:
    """Symbolic and eager calls agree; the weights flag only adds weights.

    A fresh layer is built symbolically inside a functional model, then called eagerly; both calls
    must give the same output structure, shapes (the symbolic batch is None), dtypes, and the model
    and the eager call the same values. With `weights_kwarg`, the flagged call must return
    `(output, weights)` with `output` matching the plain call and `weights[..., T]` over the padded
    input. `expected_output_shape` (a shape tuple, or a structure of them, None = any size)
    describes the plain call's output.
    """
    check = "call"
    layer = spec.make()
    model, symbolic = spec.build_model(layer, return_weights=False)
    eager = spec.call(layer)
    if describe(symbolic) != describe(eager):
        fail(
            check,
            spec,
            f"symbolic output structure {describe(symbolic)} differs from eager {describe(eager)}",
        )
    for index, (sym, eag) in enumerate(zip(flat(symbolic), flat(eager), strict=True)):
        if not shapes_compatible(sym.shape, eag.shape):
            fail(check, spec, f"output {index}: symbolic shape {sym.shape}, eager {eag.shape}")
        if dtype_name(sym) != dtype_name(eag):
            fail(
                check,
                spec,
                f"output {index}: symbolic dtype {dtype_name(sym)}, eager {dtype_name(eag)}",
            )
    if expected_output_shape is not None:
        expected = _flatten_shape_structure(expected_output_shape)
        for what, output in (("eager", eager), ("symbolic", symbolic)):
            shapes = [tuple(x.shape) for x in flat(output)]
            if len(expected) != len(shapes) or not all(
                shapes_compatible(e, s) for e, s in zip(expected, shapes, strict=True)
            ):
                fail(
                    check,
                    spec,
                    f"{what} output shapes {shapes}, expected {expected_output_shape}",
                )
    assert_outputs_close(
        check, spec, "functional model vs eager call", eager, model(spec.model_inputs()), atol, rtol
    )
    if spec.weights_kwarg is None:
        return

    flagged = spec.call(layer, return_weights=True)
    if not isinstance(flagged, (tuple, list)) or len(flagged) != 2:
        fail(
            check,
            spec,
            f"calling with {spec.weights_kwarg}=True must return (output, weights); "
            f"got {describe(flagged)}",
        )
    output, weights = flagged
    if describe(output) != describe(eager):
        fail(
            check,
            spec,
            f"with {spec.weights_kwarg}=True the output structure {describe(output)} differs "
            f"from the plain call's {describe(eager)}",
        )
    assert_outputs_close(
        check, spec, f"output with {spec.weights_kwarg}=True vs without", eager, output, atol, rtol
    )
    if spec.weights_mask is None and not keras.ops.is_tensor(weights):
        fail(check, spec, f"weights must be one tensor, got {type(weights).__name__}")
    if spec.mask is not None:
        weights_with_masks(check, spec, weights, spec.mask)
    # A fresh layer with the same weights: Keras's functional graph check sizes every node's
    # outputs by the layer's first call, so one instance cannot serve both return structures.
    flagged_layer = spec.make()
    flagged_model, _ = spec.build_model(flagged_layer, return_weights=True)
    flagged_layer.set_weights(layer.get_weights())
    assert_outputs_close(
        check,
        spec,
        f"functional model vs eager call with {spec.weights_kwarg}=True",
        flagged,
        flagged_model(spec.model_inputs()),
        atol,
        rtol,
    )
