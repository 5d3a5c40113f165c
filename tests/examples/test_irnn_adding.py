import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "irnn_adding.py"


def load():
    spec = importlib.util.spec_from_file_location("irnn_adding", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_target_is_the_sum_of_the_two_marked_values_one_in_each_half():
    inputs, targets = load().make_batch(np.random.default_rng(0), 50, length=10)
    values, markers = inputs[..., 0], inputs[..., 1]
    assert np.all(markers[:, :5].sum(1) == 1) and np.all(markers[:, 5:].sum(1) == 1)
    np.testing.assert_allclose(targets[:, 0], (values * markers).sum(1), rtol=1e-6)
    assert np.all((values >= 0) & (values < 1))


def test_the_irnn_starts_as_le_et_al_initialise_it():
    example = load()
    model = example.build_model("irnn", 10, 8)
    cell = model.get_layer("irnn").cell
    np.testing.assert_array_equal(cell.recurrent_kernel.numpy(), np.eye(8))
    assert cell.activation.__name__ == "relu" and np.abs(cell.kernel.numpy()).max() < 0.01
    assert (
        model.get_layer("irnn").count_params()
        == example.build_model("tanh", 10, 8).get_layer("tanh").count_params()
    )


def test_runs_tiny_and_prints_each_networks_mse(capsys):
    assert load().main(["--length", "6", "--steps", "2", "--units", "4"]) == 0
    out = capsys.readouterr().out
    mses = dict(re.findall(r"^seed 0 (irnn|tanh): test MSE ([\d.]+)", out, re.M))
    assert set(mses) == {"irnn", "tanh"} and all(float(m) < 10 for m in mses.values())


def test_bad_sizes_are_refused(capsys):
    with pytest.raises(SystemExit) as exited:
        load().main(["--length", "1"])
    assert exited.value.code == 2 and "--length is too small" in capsys.readouterr().err
