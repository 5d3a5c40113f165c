import importlib.metadata
import json
import os
import statistics
from pathlib import Path


def _jaxlib_below(version: str) -> bool:
    try:
        installed = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        return False
    return tuple(map(int, installed.split(".")[:2])) < tuple(map(int, version.split(".")))


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# The tests' models are tiny: one TensorFlow thread per op keeps the pytest-xdist workers (one
# per core) from competing for cores; child processes inherit it.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
if os.environ["KERAS_BACKEND"] == "jax" and _jaxlib_below("0.11"):
    # Outside jit, JAX compiles each op for every new shape and dtype, and compiling, not
    # running, is the time of these tiny tests: about 35 ms of XLA per op with its default
    # pipeline. Fewer optimizations and no XLA fusion emitters more than halve the CPU of the
    # tests `make test` runs under JAX (234 -> 103 s); the tests compare values, not speed.
    # Only on the jaxlib the dev extra installs (0.10): XLA aborts the process on a flag it
    # does not know, and jaxlib 0.11.2 has no --xla_cpu_use_fusion_emitters ("Unknown flag in
    # XLA_FLAGS", seen on a GPU machine).
    os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
    fast_compile = "--xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1"
    os.environ["XLA_FLAGS"] = f"{fast_compile} {os.environ.get('XLA_FLAGS', '')}".strip()

import keras  # noqa: E402
import pytest  # noqa: E402

# Seconds each test file took (setup, calls and teardown; `pytest --durations=0`), used only to
# order the files, longest first, so that the xdist workers (`--dist loadfile`) end together.
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")


def pytest_collection_modifyitems(config, items):
    if keras.backend.backend() != "tensorflow":
        skip = pytest.mark.skip(reason=f"TensorFlow only, the backend is {keras.backend.backend()}")
        for item in items:
            if item.get_closest_marker("tensorflow_only"):
                item.add_marker(skip)
    seconds = json.loads(FILE_SECONDS.read_text())
    unknown = statistics.median(seconds.values())
    # A stable sort: each file's tests stay together and in their order.
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::")[0], unknown))


COLLECT_EVERY = 20
_finished_tests = [0]  # tests this process has finished


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Every test starts from float32, a fixed seed and a fresh name scope.

    `clear_session` collects garbage only after every `COLLECT_EVERY`-th test: a full
    collection of a heap that holds TensorFlow takes about 0.2 s of CPU, minutes over the
    suite's thousands of tests, and the models the tests leave are freed as well a few tests
    later."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
    _finished_tests[0] += 1
    keras.backend.clear_session(free_memory=_finished_tests[0] % COLLECT_EVERY == 0)
