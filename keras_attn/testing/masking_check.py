"""The masking check: zero weight on padded positions, outputs independent of padded values.

It also holds the helpers that align the padding mask with a layer's weights (the `weights_mask`
hook of `LayerSpec`), which the call check uses to validate the weights' shapes.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from keras_attn.testing.assertions import assert_finite, fail
from keras_attn.testing.comparison import describe, flat, to_numpy
from keras_attn.testing.spec import LayerSpec

__all__ = ["PADDING_INVARIANCE_TOLERANCE", "PADDING_NOISE_SCALE", "check_masking"]


# Standard deviation of the noise written into padded positions by the invariance check. Large on
# purpose: a layer that lets padded values reach its output cannot hide behind small numbers.
PADDING_NOISE_SCALE = 1e3

# Tolerance of the padding-invariance comparison (absolute and relative).
PADDING_INVARIANCE_TOLERANCE = 1e-6


def with_fully_padded_row(mask: np.ndarray) -> np.ndarray:
    """A copy of `mask` whose batch row 0 pads every position."""
    mask = mask.copy()
    mask[0] = False
    return mask


def _padded_positions_noise(array: np.ndarray, mask: np.ndarray, seed: int) -> np.ndarray:
    """A copy of `array` whose padded positions hold large random values (random ids for ints)."""
    rng = np.random.default_rng(seed)
    padded = ~mask.reshape(mask.shape + (1,) * (array.ndim - 2))
    padded = np.broadcast_to(padded, array.shape)
    if np.issubdtype(array.dtype, np.floating):
        noise = rng.normal(scale=PADDING_NOISE_SCALE, size=array.shape).astype(array.dtype)
    elif np.issubdtype(array.dtype, np.integer):
        high = max(int(array.max()), 1) + 1
        noise = rng.integers(0, high, size=array.shape).astype(array.dtype)
    elif array.dtype == bool:
        noise = rng.random(size=array.shape) < 0.5
    else:
        raise ValueError(f"Cannot randomise padded positions of dtype {array.dtype}")
    return np.where(padded, noise, array)


def _unpadded_selector(shape: tuple, mask: np.ndarray) -> np.ndarray:
    """Bool array of `shape`: True where every non-batch axis of length T indexes a real position.

    Axes of length T may be per-position axes of the padded input (a self-attention output, the
    query axis of its weights), whose entries at padded positions are allowed to change.
    """
    batch, length = mask.shape
    keep = np.ones(shape, dtype=bool)
    if not shape or shape[0] != batch:
        return keep
    for axis in range(1, len(shape)):
        if shape[axis] != length:
            continue
        axis_shape = [1] * len(shape)
        axis_shape[0], axis_shape[axis] = batch, length
        keep &= mask.reshape(axis_shape)
    return keep


def _aligned_mask(mask: np.ndarray, shape: tuple) -> np.ndarray | None:
    """`mask` `(batch, *tail)` broadcast to `shape` `(batch, *middle, *tail)`, or None if unfit.

    Axes are inserted after the batch axis; tail axes of size 1 broadcast.
    """
    shape = tuple(shape)
    if mask.ndim < 1 or mask.ndim > len(shape) or mask.shape[0] != shape[0]:
        return None
    tail = mask.shape[1:]
    weights_tail = shape[len(shape) - len(tail) :]
    if any(m not in (1, w) for m, w in zip(tail, weights_tail, strict=True)):
        return None
    expanded = mask.reshape((mask.shape[0],) + (1,) * (len(shape) - mask.ndim) + tail)
    return np.broadcast_to(expanded, shape)


def weights_with_masks(
    check: str, spec: LayerSpec, weights: Any, mask: np.ndarray
) -> list[tuple[Any, np.ndarray]]:
    """Pairs `(weights tensor, its bool mask broadcast to its shape)`; fails on a mismatch."""
    masks = spec.weights_masks(mask)
    if describe(weights) != describe(masks):
        fail(
            check,
            spec,
            f"weights structure {describe(weights)} does not match the structure "
            f"{describe(masks)} given by weights_mask",
        )
    pairs = []
    for index, (tensor, tensor_mask) in enumerate(zip(flat(weights), flat(masks), strict=True)):
        aligned = _aligned_mask(tensor_mask, tuple(tensor.shape))
        if aligned is not None:
            pairs.append((tensor, aligned))
        elif spec.weights_mask is None:
            fail(
                check,
                spec,
                f"weights shape {tuple(tensor.shape)}: last axis must run over the "
                f"{spec.padded_length} positions of {spec.padded_input!r}",
            )
        else:
            fail(
                check,
                spec,
                f"weights {index} of shape {tuple(tensor.shape)} does not fit its mask of shape "
                f"{tensor_mask.shape} from weights_mask (aligned at the batch axis and the "
                "trailing axes)",
            )
    return pairs


def _assert_zero_on_padding(check: str, spec: LayerSpec, when: str, weights: Any) -> None:
    for index, (tensor, keep) in enumerate(weights_with_masks(check, spec, weights, spec.mask)):
        values = to_numpy(keras.ops.cast(tensor, "float32"))
        on_padding = np.where(keep, 0.0, values)
        if np.any(on_padding != 0):
            which = "" if spec.weights_mask is None else f" (weights {index})"
            fail(
                check,
                spec,
                f"weights at padded positions must be exactly 0{when}{which}; found "
                f"{np.count_nonzero(on_padding)} nonzero "
                f"(max |w| = {np.abs(on_padding).max():.3g})",
            )


def check_masking(spec: LayerSpec) -> None:
    """Padding contract: zero weights on padding, outputs independent of padded values.

    - With `weights_kwarg`: `weights[..., k]` is exactly 0 wherever `mask[:, k]` is False (with
      `weights_mask`: every weights tensor is exactly 0 wherever its mask is False), both on the
      given inputs and on the noisy ones below.
    - Refilling the padded positions of `inputs[padded_input]` with noise of standard deviation
      `PADDING_NOISE_SCALE` (random ids for integer inputs) leaves every output equal within
      `PADDING_INVARIANCE_TOLERANCE`. Output axes of length T are treated as per-position axes of
      the padded input and compared only at real positions (so pick T unlike other sizes in a
      test, or that axis is compared only partially).
    - With batch row 0 fully padded, every float output is finite. (Its weights are not required
      to be zero: with no real position there is nothing to attend to.)
    """
    check = "masking"
    if spec.mask is None:
        raise ValueError("check_masking needs a LayerSpec with a mask")
    if spec.mask.all():
        raise ValueError("The mask pads no position, so the masking check would prove nothing.")
    return_weights = spec.returns_weights
    layer = spec.make()
    outputs = spec.call(layer, return_weights=return_weights)

    noisy_inputs = dict(spec.inputs)
    noisy_inputs[spec.padded_input] = _padded_positions_noise(
        spec.inputs[spec.padded_input], spec.mask, seed=0
    )
    noisy = spec.call(layer, spec.model_inputs(inputs=noisy_inputs), return_weights=return_weights)
    if return_weights:
        _assert_zero_on_padding(check, spec, "", outputs[1])
        _assert_zero_on_padding(check, spec, " (padded values refilled with noise)", noisy[1])

    for index, (clean_x, noisy_x) in enumerate(zip(flat(outputs), flat(noisy), strict=True)):
        clean_x, noisy_x = to_numpy(clean_x), to_numpy(noisy_x)
        keep = _unpadded_selector(clean_x.shape, spec.mask)
        close = np.isclose(
            noisy_x,
            clean_x,
            atol=PADDING_INVARIANCE_TOLERANCE,
            rtol=PADDING_INVARIANCE_TOLERANCE,
        )
        leaks = keep & ~close
        if np.any(leaks):
            diff = np.abs(noisy_x.astype("float64") - clean_x.astype("float64"))[leaks]
            fail(
                check,
                spec,
                f"output {index} depends on the values at padded positions of "
                f"{spec.padded_input!r}: {np.count_nonzero(leaks)} entries changed "
                f"(max change {diff.max():.3g}) when they were refilled with noise",
            )

    padded_row = spec.call(
        layer,
        spec.model_inputs(mask=with_fully_padded_row(spec.mask)),
        return_weights=return_weights,
    )
    assert_finite(check, spec, "with a fully padded row", padded_row)
