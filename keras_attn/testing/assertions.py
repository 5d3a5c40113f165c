"""How a check fails: `AssertionError`s whose message starts with `[<check>] <LayerClass>:`."""

from __future__ import annotations

from typing import Any, NoReturn

import keras
import numpy as np

from keras_attn.testing.comparison import flat, is_float, to_numpy
from keras_attn.testing.spec import LayerSpec


def fail(check: str, spec: LayerSpec, message: str) -> NoReturn:
    """Fails `check` on the layer of `spec` with `message`."""
    raise AssertionError(f"[{check}] {spec.name}: {message}")


def assert_outputs_close(
    check: str,
    spec: LayerSpec,
    what: str,
    expected: Any,
    actual: Any,
    atol: float,
    rtol: float,
) -> None:
    """Fails `check` unless `actual` has the tensors of `expected`, each within `atol`/`rtol`."""
    expected_flat, actual_flat = flat(expected), flat(actual)
    if len(expected_flat) != len(actual_flat):
        fail(
            check,
            spec,
            f"{what}: {len(actual_flat)} output tensors, expected {len(expected_flat)}",
        )
    for index, (want, got) in enumerate(zip(expected_flat, actual_flat, strict=True)):
        want, got = to_numpy(want), to_numpy(got)
        if want.shape != got.shape:
            fail(
                check, spec, f"{what}: output {index} has shape {got.shape}, expected {want.shape}"
            )
        try:
            np.testing.assert_allclose(got, want, atol=atol, rtol=rtol)
        except AssertionError as error:
            fail(
                check, spec, f"{what}: output {index} differs (atol={atol}, rtol={rtol}).\n{error}"
            )


def assert_finite(check: str, spec: LayerSpec, what: str, outputs: Any) -> None:
    """Fails `check` if a floating-point tensor of `outputs` holds a NaN or an infinity."""
    for index, x in enumerate(flat(outputs)):
        if not is_float(x):
            continue
        values = to_numpy(keras.ops.cast(x, "float32"))
        if not np.all(np.isfinite(values)):
            bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
            fail(check, spec, f"{what}: output {index} has {bad} NaN/Inf values")
