import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "elman_vs_jordan.py"


def load():
    spec = importlib.util.spec_from_file_location("elman_vs_jordan", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_targets_are_the_delayed_inputs():
    example = load()
    inputs, targets = example.make_batch(np.random.default_rng(0), 4, delay=3)
    np.testing.assert_array_equal(targets[:, 3:], inputs.argmax(-1)[:, :-3])
    assert np.all(targets[:, :3] == 0)


def test_runs_tiny_and_prints_both_accuracies(capsys):
    example = load()
    assert example.main(["--steps", "2", "--units", "4"]) == 0
    out = capsys.readouterr().out
    for kind in ("elman", "jordan"):
        line = next(line for line in out.splitlines() if line.strip().startswith(kind))
        accuracy = float(line.split("accuracy")[1].split("%")[0])
        assert 0.0 <= accuracy <= 100.0


def test_bad_delay_is_one_clear_error():
    example = load()
    with pytest.raises(SystemExit):
        example.main(["--delay", "0"])
