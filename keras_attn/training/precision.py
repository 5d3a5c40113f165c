"""Mixed-precision policy selection: `auto` picks the policy the training device computes fastest.

`auto` resolves from descriptions of the visible accelerators (`accelerators()`), so the choice
itself (`choose_policy`) is a pure function of them:

- a TPU, or GPUs of compute capability 8.0 or more (Ampere and later): `mixed_bfloat16`, which
  has float32's exponent range and needs no loss scaling;
- older GPUs, or GPUs whose capability is not reported: `mixed_float16` (with loss scaling);
- no accelerator: `float32`.

This module imports TensorFlow and Keras only when a policy is resolved or set, so the command
line can validate `--mixed-precision` without them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from keras_attn.errors import ConfigError

POLICIES = ("auto", "float32", "mixed_float16", "mixed_bfloat16")

# GPUs from this compute capability on (NVIDIA Ampere) have bfloat16 tensor cores.
BFLOAT16_COMPUTE_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class Accelerator:
    """A visible accelerator: `kind` "GPU" or "TPU", its name, and a GPU's compute capability."""

    kind: str
    name: str = ""
    compute_capability: tuple[int, int] | None = None

    def describe(self) -> str:
        """E.g. `GPU 'NVIDIA A100-SXM4-40GB' of compute capability 8.0`."""
        text = f"{self.kind} {self.name!r}" if self.name else self.kind
        if self.compute_capability is not None:
            major, minor = self.compute_capability
            text += f" of compute capability {major}.{minor}"
        return text


@dataclass(frozen=True)
class PolicyChoice:
    """The policy a `mixed_precision` name resolves to, and why (for `auto`)."""

    policy: str
    reason: str


def check_policy_name(name: str) -> None:
    """Raise a `ConfigError` for a name outside `POLICIES`."""
    if name not in POLICIES:
        raise ConfigError(
            f"Expected mixed_precision in {list(POLICIES)}. Received: {name!r}",
            ["mixed_precision"],
        )


def accelerators() -> list[Accelerator]:
    """The GPUs and TPUs TensorFlow sees, with the details it reports for each."""
    import tensorflow as tf

    found = []
    for kind in ("TPU", "GPU"):
        for device in tf.config.list_physical_devices(kind):
            details = tf.config.experimental.get_device_details(device) if kind == "GPU" else {}
            capability = details.get("compute_capability")
            found.append(
                Accelerator(
                    kind,
                    details.get("device_name", device.name),
                    None if capability is None else tuple(capability),
                )
            )
    return found


def choose_policy(devices: Sequence[Accelerator]) -> PolicyChoice:
    """The policy `auto` stands for on `devices` (see the module docstring).

    With several GPUs the least capable one decides, since every replica runs the same policy.

    Example:

    >>> choose_policy([Accelerator("GPU", "A100", (8, 0))]).policy
    'mixed_bfloat16'
    >>> choose_policy([Accelerator("GPU", "V100", (7, 0))]).policy
    'mixed_float16'
    >>> choose_policy([]).policy
    'float32'
    """
    tpus = [device for device in devices if device.kind == "TPU"]
    gpus = [device for device in devices if device.kind == "GPU"]
    if tpus:
        return PolicyChoice("mixed_bfloat16", f"{tpus[0].describe()}: bfloat16 is native")
    if not gpus:
        return PolicyChoice("float32", "no GPU or TPU")
    unknown = [gpu for gpu in gpus if gpu.compute_capability is None]
    if unknown:
        reason = f"{unknown[0].describe()} reports no compute capability"
        return PolicyChoice("mixed_float16", reason)
    weakest = min(gpus, key=lambda gpu: gpu.compute_capability)
    if weakest.compute_capability >= BFLOAT16_COMPUTE_CAPABILITY:
        return PolicyChoice("mixed_bfloat16", f"{weakest.describe()} computes in bfloat16")
    return PolicyChoice("mixed_float16", f"{weakest.describe()} predates bfloat16 (8.0)")


def resolve_policy(name: str, devices: Sequence[Accelerator] | None = None) -> PolicyChoice:
    """The policy `name` stands for: `auto` → `choose_policy(devices)`, others unchanged.

    Args:
        name: one of `POLICIES`.
        devices: the accelerators to choose for (default: `accelerators()`, the visible ones).

    Raises:
        keras_attn.errors.ConfigError: for a name outside `POLICIES`.
    """
    check_policy_name(name)
    if name != "auto":
        return PolicyChoice(name, "as given")
    return choose_policy(accelerators() if devices is None else devices)


@contextlib.contextmanager
def dtype_policy(name: str) -> Iterator[str]:
    """Make policy `name` Keras' global dtype policy for the `with` block.

    The policy found on entry is restored on exit, whether the block returns or raises.

    Args:
        name: a policy of `POLICIES` other than `auto` (resolve that first).
    """
    import keras

    if name not in POLICIES or name == "auto":
        raise ConfigError(
            f"Expected mixed_precision in {list(POLICIES[1:])}. Received: {name!r}",
            ["mixed_precision"],
        )
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield name
    finally:
        keras.config.set_dtype_policy(previous)
