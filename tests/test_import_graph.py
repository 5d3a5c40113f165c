"""keras_attn's import graph has no cycle, and its packages import only the layers below them.

The graph is built with `ast` from every module of the package, counting module-level and
function-level imports alike. A module imports its own package's `__init__` implicitly; that
edge is not counted (it is not a choice the module makes).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import keras_attn

ROOT = Path(keras_attn.__file__).parent

# The package layering, lowest first: a top-level package or module may import from its own
# layer (no cycle allowed) and from the layers before it, never from a later one. `formats` holds
# the files that training, export and serving share (run directory, warm-up records);
# `_private` every private Keras/TensorFlow access; `_serializables` imports the subpackages that
# register Keras objects by name (importlib), not through an import statement.
LAYERS = (
    (
        "api_export",
        "registry",
        "errors",
        "options",
        "_initializers",
        "_private",
        "_serializables",
        "_lazy",
    ),
    ("ops",),
    ("distributions", "scores"),
    ("layers",),
    ("models", "decoding"),
    ("text", "vision"),
    ("formats",),
    ("export", "serving"),
    ("training",),
    ("testing",),
    ("cli",),
)


def module_names() -> dict[str, Path]:
    names = {}
    for path in ROOT.rglob("*.py"):
        parts = ["keras_attn", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The keras_attn modules that `name` (at `path`) imports anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module
            # `from a import b` imports module `a.b` when there is one, else a name of `a`.
            targets = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target in modules and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def module_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def top_level(name: str) -> str:
    """`keras_attn.training.trainer` -> `training`; the root package itself -> `keras_attn`."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "keras_attn"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as `[a, b, …, a]`, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for name, targets in graph.items():
        edges = packages.setdefault(top_level(name), set())
        edges.update(top_level(t) for t in targets if top_level(t) != top_level(name))
    return packages


def test_the_graph_sees_function_level_imports():
    graph = module_graph()
    assert "keras_attn.export.translator" in graph["keras_attn.training.tasks.translation"]
    assert "keras_attn.export.classifier" in graph["keras_attn.export.kinds"]


def test_no_module_import_cycle():
    cycle = find_cycle(module_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_package_import_cycle():
    cycle = find_cycle(package_graph(module_graph()))
    assert cycle is None, "package import cycle: " + " -> ".join(cycle)


def test_packages_import_only_their_layer_and_those_below():
    rank = {name: i for i, layer in enumerate(LAYERS) for name in layer}
    packages = package_graph(module_graph())
    unplaced = sorted(set(packages) - set(rank) - {"keras_attn"})
    assert not unplaced, f"add these to LAYERS: {unplaced}"
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in packages.items()
        if source != "keras_attn"
        for target in targets
        if target != "keras_attn" and rank[target] > rank[source]
    )
    assert not upward, f"imports against the layering {LAYERS}: {upward}"


def test_the_library_does_not_import_the_command_line():
    graph = module_graph()
    importers = sorted(name for name, targets in graph.items() if "keras_attn.cli" in targets)
    assert importers == [], f"modules importing keras_attn.cli: {importers}"


def test_find_cycle_names_the_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


BLOCK_TENSORFLOW = """
import sys


class _NoTensorFlow:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("tensorflow", "tensorflow_text"):
            raise ModuleNotFoundError(f"No module named {name!r}")


sys.meta_path.insert(0, _NoTensorFlow())
"""


def test_the_every_backend_tests_load_without_tensorflow(tmp_path):
    """The tests `make test` runs under JAX also run where TensorFlow is not installed (a GPU
    machine with JAX or PyTorch only): neither they nor the modules they test import it."""
    makefile = (ROOT.parent / "Makefile").read_text(encoding="utf-8")
    directories = re.search(r"^JAX_DIRS :=((?:.*\\\n)*.*)$", makefile, re.MULTILINE).group(1)
    (tmp_path / "sitecustomize.py").write_text(BLOCK_TENSORFLOW)
    environment = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(tmp_path)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider"]
    command += ["--collect-only", "-m", "every_backend", *directories.replace("\\", " ").split()]
    done = subprocess.run(
        command, cwd=ROOT.parent, env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^(\d+)/\d+ tests collected", done.stdout, re.MULTILINE), done.stdout[-500:]
