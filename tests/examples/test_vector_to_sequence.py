import importlib.util
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "vector_to_sequence.py"


def load():
    spec = importlib.util.spec_from_file_location("vector_to_sequence_example", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_encoding_is_bits_and_decimal_digits():
    example = load()
    bits, digits = example.encode(np.array([123, 7]))
    np.testing.assert_array_equal(digits, [[1, 2, 3], [0, 0, 7]])
    assert int((bits[0] * 2 ** np.arange(example.BITS)).sum()) == 123


def test_runs_tiny_and_prints_exact_match(capsys):
    example = load()
    assert example.main(["--steps", "2", "--units", "8", "--conditioning", "every_step"]) == 0
    out = capsys.readouterr().out
    for name in ("train", "held_out"):
        line = next(line for line in out.splitlines() if line.strip().startswith(name))
        exact = float(line.split("exact match")[1].split("%")[0])
        assert 0.0 <= exact <= 100.0
