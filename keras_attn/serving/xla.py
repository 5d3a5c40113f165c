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


# The static `CounterCell*` of `/tensorflow/core/xla_compilations` inside
# `tensorflow::metrics::UpdateXlaCompilationTime(uint64)`, which TensorFlow's device compiler
# calls once per XLA compilation (tensorflow/core/framework/metrics.cc).
_UPDATE_COMPILATION_TIME = "_ZN10tensorflow7metrics24UpdateXlaCompilationTimeEm"
_COMPILATIONS_CELL = "_ZZN10tensorflow7metrics24UpdateXlaCompilationTimeEmE21xla_compilations_cell"
_SYMBOL = [
    ("name", "<u4"),
    ("info", "u1"),
    ("other", "u1"),
    ("section", "<u2"),
    ("value", "<u8"),
    ("size", "<u8"),
]


def _symbol_values(path: str, names: tuple[str, ...]) -> dict[str, int]:
    """The addresses (`st_value`) of `names` in the ELF64 symbol table (`.symtab`) of `path`."""
    import struct

    import numpy as np

    with open(path, "rb") as file:
        header = file.read(64)
        if header[:5] != b"\x7fELF\x02":
            raise RuntimeError(f"{path} is not a 64-bit ELF file")
        (section_offset,) = struct.unpack_from("<Q", header, 0x28)
        entry_size, count = struct.unpack_from("<HH", header, 0x3A)
        file.seek(section_offset)
        table = file.read(entry_size * count)
        sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * entry_size) for i in range(count)]
        symtab = next((s for s in sections if s[1] == 2), None)  # SHT_SYMTAB
        if symtab is None:
            raise RuntimeError(f"{path} has no symbol table")
        strings_section = sections[symtab[6]]
        file.seek(strings_section[4])
        strings = file.read(strings_section[5])
        file.seek(symtab[4])
        symbols = np.frombuffer(file.read(symtab[5]), dtype=np.dtype(_SYMBOL))
    values = {}
    for name in names:
        offset = strings.find(b"\0" + name.encode() + b"\0")
        found = symbols["value"][symbols["name"] == offset + 1] if offset >= 0 else []
        if len(found) == 0:
            raise RuntimeError(f"{path} has no symbol {name}")
        values[name] = int(found[0])
    return values


@functools.cache
def _compilations_cell() -> int:
    """The run-time address of the `xla_compilations_cell` pointer."""
    import tensorflow as tf

    path = os.path.join(tf.sysconfig.get_lib(), "libtensorflow_framework.so.2")
    values = _symbol_values(path, (_UPDATE_COMPILATION_TIME, _COMPILATIONS_CELL))
    loaded = ctypes.cast(getattr(ctypes.CDLL(path), _UPDATE_COMPILATION_TIME), ctypes.c_void_p)
    return loaded.value - values[_UPDATE_COMPILATION_TIME] + values[_COMPILATIONS_CELL]


def xla_compilations() -> int:
    """XLA compilations in this process so far: TensorFlow's `/tensorflow/core/xla_compilations`.

    The counter stock TensorFlow Serving exports as `:tensorflow:core:xla_compilations`; one per
    executable compiled (a `tf.function(jit_compile=True)` on a new input shape). TensorFlow's
    Python API does not read it, so it is read from the loaded TensorFlow library: the counter's
    cell, found through the library's symbol table.

    Raises:
        RuntimeError: the TensorFlow library has no such symbol (a build that changed it).
    """
    pointer = ctypes.c_void_p.from_address(_compilations_cell()).value
    return 0 if not pointer else ctypes.c_int64.from_address(pointer).value
