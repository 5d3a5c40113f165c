import importlib.util
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "ntm_copy.py"


def load_script():
    spec = importlib.util.spec_from_file_location("ntm_copy", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_copy_batch_layout():
    copy = load_script()
    inputs, targets, weights = copy.make_batch(np.random.default_rng(0), np.array([3, 1]), 9)
    assert inputs.shape == (2, 9, 9) and targets.shape == (2, 9, 8) and weights.shape == (2, 9)
    # Row 0: bits at steps 0..2, delimiter at step 3, recall of the same bits at steps 4..6.
    np.testing.assert_array_equal(inputs[0, 3], np.eye(9)[8])
    np.testing.assert_array_equal(targets[0, 4:7], inputs[0, :3, :8])
    np.testing.assert_array_equal(weights[0], [0, 0, 0, 0, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(weights[1], [0, 0, 1, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(inputs[:, :, 8].sum(-1), [1, 1])  # one delimiter per row
    assert not inputs[0, 4:].any()  # blank inputs during the recall


def test_lstm_is_matched_to_the_ntm_parameter_count():
    copy = load_script()
    args = copy.parse_args(["--controller-units", "8", "--memory-size", "6", "--memory-width", "4"])
    ntm = copy.build_ntm(args).count_params()
    lstm = copy.build_lstm(copy.lstm_units_matching(ntm)).count_params()
    assert abs(lstm - ntm) / ntm < 0.1


def test_runs_tiny(capsys):
    copy = load_script()
    argv = ["--steps", "2", "--batch-size", "4", "--controller-units", "8"]
    argv += ["--memory-size", "22", "--memory-width", "4", "--log-every", "1", "--eval-size", "8"]
    assert copy.main(argv) == 0
    out = capsys.readouterr().out
    assert "ntm step 2" in out and "lstm step 2" in out
    assert out.strip().splitlines()[-2].startswith("ntm")
