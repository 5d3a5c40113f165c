import importlib.util
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "attention_zoo.py"


def load_zoo():
    spec = importlib.util.spec_from_file_location("attention_zoo", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_task_has_the_reversal_alignment():
    zoo = load_zoo()
    source, target = zoo.make_batch(np.random.default_rng(0), 4)
    np.testing.assert_array_equal(target, source[:, ::-1])
    assert source.min() >= 1  # 0 is padding


def test_runs_and_writes_heatmaps(tmp_path, capsys):
    zoo = load_zoo()
    assert (
        zoo.main(
            [
                "--out",
                str(tmp_path),
                "--steps",
                "3",
                "--scores",
                "dot",
                "--distributions",
                "softmax",
            ]
        )
        == 0
    )
    assert (tmp_path / "dot-softmax.png").stat().st_size > 0
    assert (tmp_path / "alignments.png").stat().st_size > 0
    assert "dot" in capsys.readouterr().out
