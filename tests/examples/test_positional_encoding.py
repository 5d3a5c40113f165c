import importlib.util
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "positional_encoding.py"


def load_example():
    spec = importlib.util.spec_from_file_location("positional_encoding", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_matrix_is_the_sinusoid_formula():
    example = load_example()
    matrix = example.encoding_matrix(50, 12)
    assert matrix.shape == (50, 12)
    np.testing.assert_allclose(matrix, example.reference(50, 12), rtol=0, atol=1e-5)
    np.testing.assert_array_equal(matrix[0, 0::2], 0.0)  # sin(0)
    np.testing.assert_array_equal(matrix[0, 1::2], 1.0)  # cos(0)


def test_runs_tiny_and_writes_the_png(tmp_path, capsys):
    example = load_example()
    out = tmp_path / "figures" / "pe.png"
    assert example.main(["--out", str(out), "--positions", "60", "--dim", "16"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "60 positions x 16 dimensions" in printed
    # the offset-10 dot products are printed and do not depend on the start position
    line = printed.split("PE(pos)·PE(pos+10)")[1].splitlines()[0]
    products = [float(value) for value in line.split(":")[1].split(",")]
    assert len(products) >= 2
    np.testing.assert_allclose(products, products[0], atol=1e-4)


def test_default_run_prints_the_documented_offset_10_product(tmp_path, capsys):
    """2000 positions x 500 dimensions: PE(pos)·PE(pos+10) = sum_i cos(10 / 10000^(2i/500))."""
    example = load_example()
    assert example.main(["--out", str(tmp_path / "pe.png")]) == 0
    printed = capsys.readouterr().out
    assert "2000 positions x 500 dimensions" in printed
    line = printed.split("PE(pos)·PE(pos+10)")[1].splitlines()[0]
    products = [float(value) for value in line.split(":")[1].split(",")]
    expected = np.cos(10 / 10000.0 ** (np.arange(0, 500, 2) / 500)).sum()
    assert round(expected, 3) == 169.696  # the value docs/transformer.md reports
    np.testing.assert_allclose(products, expected, atol=2e-3)
