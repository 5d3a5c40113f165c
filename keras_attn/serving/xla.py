"""XLA JIT compilation on or off for the whole process: stock `--xla_cpu_compilation_enabled`.

Stock `tensorflow_model_server` calls `tensorflow::DisableXlaCompilation()` at start-up unless
`--xla_cpu_compilation_enabled` is true (tensorflow_serving/model_servers/main.cc). The switch is
process-wide and not tied to a device: while it is off, TensorFlow's XLA compiler refuses every
compilation it has not cached yet with INTERNAL `XLA compilation disabled`
(tensorflow/compiler/jit/device_compiler.h). A SavedModel whose signatures call a
`tf.function(jit_compile=True)` therefore loads, and each call of such a signature fails with
that status; signatures without compiled functions run as usual.

TensorFlow's Python API does not expose the switch, so these functions call the C++ functions of
`tensorflow/compiler/jit/flags.h` in the TensorFlow library the Python package has loaded.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
from collections.abc import Callable

_DISABLE = "_ZN10tensorflow21DisableXlaCompilationEv"  # tensorflow::DisableXlaCompilation()
_ENABLE = "_ZN10tensorflow20EnableXlaCompilationEv"  # tensorflow::EnableXlaCompilation()
_IS_DISABLED = "_ZN10tensorflow20FailOnXlaCompilationEv"  # tensorflow::FailOnXlaCompilation()


@functools.cache
def _switch() -> tuple[Callable[[], None], Callable[[], None], Callable[[], bool]]:
    """The disable, enable and is-disabled functions of the loaded TensorFlow library."""
    import tensorflow as tf

    directory = tf.sysconfig.get_lib()
    candidates = sorted(glob.glob(os.path.join(directory, "libtensorflow_cc.*")))
    for path in candidates:
        try:
            # The library is already loaded by TensorFlow; opening it again returns that copy.
            library = ctypes.CDLL(path)
            disable, enable, is_disabled = (
                getattr(library, name) for name in (_DISABLE, _ENABLE, _IS_DISABLED)
            )
        except (OSError, AttributeError):
            continue
        disable.restype = enable.restype = None
        is_disabled.restype = ctypes.c_bool
        return disable, enable, is_disabled
    raise RuntimeError(
        "this TensorFlow build exports no tensorflow::DisableXlaCompilation() (looked in "
        f"{', '.join(candidates) or directory}), so --xla_cpu_compilation_enabled cannot be "
        "applied"
    )


def set_xla_compilation_enabled(enabled: bool) -> None:
    """Allows (`True`) or refuses (`False`) XLA JIT compilation in this process.

    Applies to every device and every model loaded in the process, as stock TensorFlow Serving's
    switch does; executables compiled before a refusal keep running.

    Raises:
        RuntimeError: the loaded TensorFlow library does not export the switch.
    """
    disable, enable, _ = _switch()
    if enabled:
        enable()
    else:
        disable()


def xla_compilation_enabled() -> bool:
    """Whether this process allows XLA JIT compilation (TensorFlow's default: True).

    Raises:
        RuntimeError: the loaded TensorFlow library does not export the switch.
    """
    _, _, is_disabled = _switch()
    return not is_disabled()
