"""The mixed-precision check: under `mixed_float16` and `mixed_bfloat16` a layer computes in the
compute dtype, keeps float32 weights and stays close to its float32 outputs.

References:
    Micikevicius et al., 2018, "Mixed Precision Training", arXiv:1710.03740.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import keras

from keras_attn.testing.assertions import assert_finite, assert_outputs_close, fail
from keras_attn.testing.comparison import dtype_name, flat, is_float
from keras_attn.testing.masking_check import with_fully_padded_row
from keras_attn.testing.spec import LayerSpec

__all__ = ["MIXED_PRECISION_POLICIES", "MIXED_PRECISION_TOLERANCES", "check_mixed_precision"]


MIXED_PRECISION_POLICIES = ("mixed_float16", "mixed_bfloat16")

# Absolute and relative tolerance (the same number) between a mixed-precision output cast to
# float32 and the float32 output of the same weights. float16 keeps 11 significant bits (~5e-4
# relative per rounding), bfloat16 only 8 (~4e-3); a few roundings through projections, a float32
# softmax and a weighted sum stay well inside these on the harness's tiny unit-scale shapes.
MIXED_PRECISION_TOLERANCES = {"mixed_float16": 1e-2, "mixed_bfloat16": 5e-2}


def check_mixed_precision(
    spec: LayerSpec,
    *,
    policies: tuple[str, ...] = MIXED_PRECISION_POLICIES,
    tolerances: Mapping[str, float] | None = None,
) -> None:
    """The layer built with `dtype=<policy>` computes in the compute dtype and stays accurate.

    For each policy: float outputs are in the compute dtype (integer/bool outputs exempt),
    trainable weights are float32, outputs are finite with the padding mask applied and with a
    fully padded row, and outputs are close to the float32 layer's with the same weights
    (tolerance `tolerances[policy]`, default `MIXED_PRECISION_TOLERANCES`, used as atol and rtol).

    The policy is given through the layer's `dtype=` argument, not the global policy, so sublayers
    that do not inherit `dtype=self.dtype_policy` are caught (they would compute in float32). The
    harness never sets the global policy; it is restored afterwards all the same (even on
    failure), and a layer that changed it fails the check.
    """
    check = "mixed_precision"
    tolerances = {**MIXED_PRECISION_TOLERANCES, **(tolerances or {})}
    global_policy = keras.config.dtype_policy().name
    try:
        reference_layer = spec.make()
        reference = spec.call(reference_layer, return_weights=spec.returns_weights)
        for policy in policies:
            _check_one_policy(spec, policy, reference_layer, reference, tolerances[policy])
    finally:
        changed_to = keras.config.dtype_policy().name
        keras.config.set_dtype_policy(global_policy)
    if changed_to != global_policy:
        fail(check, spec, f"the layer changed the global dtype policy to {changed_to}")


def _check_one_policy(
    spec: LayerSpec,
    policy: str,
    reference_layer: keras.layers.Layer,
    reference: Any,
    tolerance: float,
) -> None:
    check = "mixed_precision"
    return_weights = spec.returns_weights
    layer = spec.make(dtype=policy)
    try:
        spec.call(layer, return_weights=return_weights)
        layer.set_weights(reference_layer.get_weights())
        outputs = spec.call(layer, return_weights=return_weights)
    except Exception as error:  # e.g. PyTorch refuses float32 and float16 operands together
        fail(check, spec, f"under {policy} the call raised {_summary(error)}")
    compute_dtype = keras.backend.standardize_dtype(layer.compute_dtype)
    for index, x in enumerate(flat(outputs)):
        if is_float(x) and dtype_name(x) != compute_dtype:
            fail(
                check,
                spec,
                f"under {policy} output {index} is {dtype_name(x)}, expected {compute_dtype}",
            )
    for weight in layer.trainable_weights:
        if keras.backend.standardize_dtype(weight.dtype) != "float32":
            fail(
                check,
                spec,
                f"under {policy} trainable weight {weight.path} is "
                f"{keras.backend.standardize_dtype(weight.dtype)}, expected float32",
            )
    assert_finite(check, spec, f"under {policy}", outputs)
    if spec.mask is not None:
        padded_row = spec.call(
            layer,
            spec.model_inputs(mask=with_fully_padded_row(spec.mask)),
            return_weights=return_weights,
        )
        assert_finite(check, spec, f"under {policy} with a fully padded row", padded_row)
    float_pairs = [
        (want, keras.ops.cast(got, "float32"))
        for want, got in zip(flat(reference), flat(outputs), strict=True)
        if is_float(want) and is_float(got)
    ]
    assert_outputs_close(
        check,
        spec,
        f"under {policy} vs float32",
        [want for want, _ in float_pairs],
        [got for _, got in float_pairs],
        tolerance,
        tolerance,
    )


def _summary(error: Exception) -> str:
    """`Type: message` on one line, without the bold escapes and the argument list that Keras
    adds to an error raised in a layer's `call`."""
    lines = []
    for line in re.sub(r"\x1b\[[0-9;]*m", "", str(error)).splitlines():
        if line.startswith("Arguments received by"):
            break
        if line.strip():
            lines.append(line.strip())
    return f"{type(error).__name__}: {' '.join(lines)}"
