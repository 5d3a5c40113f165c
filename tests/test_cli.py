"""`keras-attn` in a child process: a mistake is one line on stderr and exit status 2, found
before TensorFlow is imported; TensorFlow's start-up logging stays off stderr unless asked for."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from keras_attn.cli import VERBOSE_ENV

# A `tensorflow` package that fails to import: on PYTHONPATH it shadows the real one, so a
# command that imports TensorFlow before reporting a mistake shows this error instead.
POISONED_TENSORFLOW = 'raise ImportError("tensorflow was imported before the mistake was found")\n'

# A `tensorflow` package standing in for the real one's start-up: it writes to file descriptor 2
# as TensorFlow's C++ code does, warns, and (FAKE_TF_FAILS=1) fails to import.
NOISY_TENSORFLOW = textwrap.dedent(
    """
    import os
    import types
    import warnings

    os.write(2, b"I0000 port.cc:153] oneDNN custom operations are on.\\n")
    warnings.warn("a start-up warning")
    if os.environ.get("FAKE_TF_FAILS"):
        raise ImportError("libtensorflow_framework.so.2: cannot open shared object file")


    def list_physical_devices():
        os.write(2, b"E0000 cuda_platform.cc:52] failed call to cuInit\\n")
        return []


    config = types.SimpleNamespace(list_physical_devices=list_physical_devices)
    """
)

# `keras-attn` whose `translate` handler imports `tensorflow`, prints one line of its own and,
# given the text `bug`, raises.
RUNNER = textwrap.dedent(
    """
    import sys

    from keras_attn.cli import main
    from keras_attn.serving import cli as serving_cli


    def translate(args):
        import tensorflow  # noqa: F401

        print("keras-attn translate: our own line", file=sys.stderr)
        if args.texts == ["bug"]:
            raise RuntimeError("a bug keeps its traceback")
        return 0


    serving_cli.run_translate = translate
    sys.exit(main(sys.argv[1:]))
    """
)


def package(root, name, source):
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(source)
    return root


def run(args, *, pythonpath=None, environ=None, code=None):
    env = {key: value for key, value in os.environ.items() if key != VERBOSE_ENV}
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env.update(environ or {})
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "keras_attn.cli"]
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory):
    return package(tmp_path_factory.mktemp("poisoned"), "tensorflow", POISONED_TENSORFLOW)


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    return package(tmp_path_factory.mktemp("noisy"), "tensorflow", NOISY_TENSORFLOW)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """`run/`, which passes the run checks (`config.json`, `model.keras`; never loaded), and
    `models/1/`, an exported version."""
    root = tmp_path_factory.mktemp("export")
    (root / "run").mkdir()
    (root / "run" / "config.json").write_text("{}")
    (root / "run" / "model.keras").write_text("")
    (root / "models" / "1").mkdir(parents=True)
    return {"run": root / "run", "models": root / "models"}


MISTAKES = {
    "train: bad argument": (
        ["train", "--out", "{tmp}/run", "--steps", "many"],
        "keras-attn train: error: argument --steps: invalid int value: 'many'",
    ),
    "export: bad argument": (
        ["export", "{run}", "--model_base_path", "{tmp}/models", "--version", "two"],
        "keras-attn export: error: argument --version: invalid int value: 'two'",
    ),
    "export: unknown flag": (
        ["export", "{run}", "--model_base_path", "{tmp}/models", "--beams", "4"],
        "keras-attn export: error: unrecognized arguments: --beams 4",
    ),
    "export: no run": (
        ["export", "{tmp}/no-run", "--model_base_path", "{tmp}/models"],
        "keras-attn export: error: {tmp}/no-run is not a run directory (no config.json)",
    ),
    "export: base path is a file": (
        ["export", "{run}", "--model_base_path", "{run}/config.json"],
        "keras-attn export: error: --model_base_path {run}/config.json is a file, not a directory",
    ),
    "export: base path under a file": (
        ["export", "{run}", "--model_base_path", "{run}/config.json/models"],
        "keras-attn export: error: --model_base_path {run}/config.json/models lies under "
        "{run}/config.json, which is a file, not a directory",
    ),
    "export: version exists": (
        ["export", "{run}", "--model_base_path", "{models}", "--version", "1"],
        "keras-attn export: error: {models}/1 exists already; choose another --version",
    ),
    "export: version is not positive": (
        ["export", "{run}", "--model_base_path", "{tmp}/models", "--version", "0"],
        "keras-attn export: error: --version must be a positive integer, got 0",
    ),
    "serve: bad argument": (
        ["serve", "--port", "99999"],
        "keras-attn serve: error: argument --port: expected a port in 0..65535, got 99999",
    ),
    "serve: no model": (
        ["serve"],
        "keras-attn serve: error: Both server_options.model_base_path and "
        "server_options.model_config_file are empty!",
    ),
    "serve: no base path": (
        ["serve", "--model_base_path", "{tmp}/models", "--file_system_poll_wait_seconds", "0"],
        "keras-attn serve: error: Could not find base path {tmp}/models for servable default",
    ),
    "serve: no config file": (
        ["serve", "--model_config_file", "{tmp}/models.config"],
        "keras-attn serve: error: {tmp}/models.config; No such file or directory",
    ),
    "serve: batching file without batching": (
        ["serve", "--model_base_path", "{tmp}", "--batching_parameters_file", "{tmp}/b.txt"],
        "keras-attn serve: error: server_options.batching_parameters_file is set without "
        "setting server_options.enable_batching to true.",
    ),
    "translate: bad argument": (
        ["translate", "--server", "localhost:8500", "--timeout", "0", "a"],
        "keras-attn translate: error: argument --timeout: expected a positive number of "
        "seconds, got 0",
    ),
    "translate: bad server": (
        ["translate", "--server", "localhost", "a"],
        "keras-attn translate: error: --server must be HOST:PORT or dns:///HOST:PORT, got "
        "'localhost'",
    ),
    "no command": ([], "keras-attn: error: the following arguments are required: COMMAND"),
}


@pytest.mark.parametrize("args, message", MISTAKES.values(), ids=MISTAKES.keys())
def test_a_mistake_is_one_line_and_exit_2_before_tensorflow(
    args, message, poisoned, exported, tmp_path
):
    names = {"tmp": tmp_path, **exported}
    result = run([arg.format(**names) for arg in args], pythonpath=poisoned)
    assert result.stderr == message.format(**names) + "\n"
    assert (result.returncode, result.stdout) == (2, "")


def test_train_with_a_missing_init_run_is_one_line_before_tensorflow(poisoned, tmp_path):
    missing = tmp_path / "no-such-run"
    args = ["train", "--out", str(tmp_path / "run"), "--init-from", str(missing)]
    result = run(args, pythonpath=poisoned)
    assert result.stderr.startswith("keras-attn train: error: ")
    assert str(missing) in result.stderr and result.stderr.count("\n") == 1
    assert (result.returncode, result.stdout) == (2, "")
    assert not (tmp_path / "run").exists()


def test_the_parser_and_help_need_no_tensorflow_and_name_the_verbose_switches(poisoned):
    result = run(["--help"], pythonpath=poisoned)
    assert (result.returncode, result.stderr) == (0, "")
    text = " ".join(result.stdout.split())
    assert "--verbose" in text and f"{VERBOSE_ENV}=1" in text
    for command in ("train", "export", "serve", "translate"):
        result = run([command, "--help"], pythonpath=poisoned)
        assert (result.returncode, result.stderr) == (0, ""), command
        assert "--verbose" in result.stdout


def test_tensorflow_start_up_output_is_dropped_and_ours_kept(noisy):
    result = run(["translate", "--server", "h:1", "a"], pythonpath=noisy, code=RUNNER)
    assert (result.returncode, result.stderr) == (0, "keras-attn translate: our own line\n")


@pytest.mark.parametrize(
    "args, environ",
    [
        (["--verbose", "translate", "--server", "h:1", "a"], {}),
        (["translate", "--server", "h:1", "a", "--verbose"], {}),
        (["translate", "--server", "h:1", "a"], {VERBOSE_ENV: "1"}),
    ],
    ids=["--verbose first", "--verbose last", VERBOSE_ENV],
)
def test_verbose_lets_tensorflow_start_up_output_through(noisy, args, environ):
    result = run(args, pythonpath=noisy, environ=environ, code=RUNNER)
    lines = result.stderr.splitlines()
    assert result.returncode == 0
    assert lines[0] == "I0000 port.cc:153] oneDNN custom operations are on."
    assert any("UserWarning: a start-up warning" in line for line in lines)
    assert lines[-1] == "keras-attn translate: our own line"


def test_a_bug_after_the_import_keeps_its_traceback(noisy):
    result = run(["translate", "--server", "h:1", "bug"], pythonpath=noisy, code=RUNNER)
    assert result.returncode == 1
    assert result.stderr.startswith("keras-attn translate: our own line\nTraceback")
    assert result.stderr.endswith("RuntimeError: a bug keeps its traceback\n")
    assert "oneDNN" not in result.stderr


def test_a_failed_import_shows_what_tensorflow_wrote(noisy):
    environ = {"FAKE_TF_FAILS": "1"}
    result = run(
        ["translate", "--server", "h:1", "a"], pythonpath=noisy, environ=environ, code=RUNNER
    )
    assert result.returncode == 1
    assert result.stderr.startswith("I0000 port.cc:153] oneDNN custom operations are on.\n")
    assert result.stderr.endswith(
        "ImportError: libtensorflow_framework.so.2: cannot open shared object file\n"
    )


def test_the_real_tensorflow_says_nothing(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    target = f"127.0.0.1:{port}"
    result = run(["translate", "--server", target, "--timeout", "10", "a"])
    assert result.stderr == (
        f"keras-attn translate: cannot reach a model server at {target} (UNAVAILABLE)\n"
    )
    assert (result.returncode, result.stdout) == (1, "")
