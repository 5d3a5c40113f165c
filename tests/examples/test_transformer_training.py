import csv
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "transformer_training.py"
TINY = [
    "--steps", "6", "--num-layers", "1", "--d-model", "8", "--num-heads", "2", "--ff-dim", "16",
    "--batch-size", "8", "--train-pairs", "200", "--dev-pairs", "16", "--vocab", "150",
    "--warmup-steps", "3", "--max-length", "20",
]  # fmt: skip


def load_example():
    spec = importlib.util.spec_from_file_location("transformer_training", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_arms_map_to_train_configs():
    example = load_example()
    args = example.parse_args(["--out", "x", "--learning-rate", "2e-3", "--clipnorm", "0.5"])
    configs = {name: example.arm_config(arm, args) for name, arm in example.ARMS.items()}
    assert {c.learning_rate for c in configs.values()} == {2e-3}  # one peak for every arm
    assert (configs["post-nowarm"].schedule, configs["post-nowarm"].warmup_steps) == ("cosine", 0)
    assert (configs["post-warm"].schedule, configs["post-warm"].warmup_steps) == ("cosine", 50)
    assert configs["post-isqrt"].schedule == "inverse-sqrt"
    assert configs["pre-nowarm"].options["normalize_first"]
    assert not configs["post-nowarm"].options["normalize_first"]
    assert configs["post-isqrt-ls"].label_smoothing == 0.1
    assert configs["post-isqrt"].label_smoothing == 0.0
    assert configs["post-isqrt-noclip"].clipnorm == 0.0 and configs["post-isqrt"].clipnorm == 0.5
    assert configs["post-nowarm-noclip"].clipnorm == 0.0


def test_runs_tiny_and_writes_curves_table_and_png(tmp_path, capsys):
    example = load_example()
    arms = "post-nowarm,post-isqrt-ls"
    assert example.main(["--out", str(tmp_path), "--arms", arms, *TINY]) == 0
    assert (tmp_path / "transformer_training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (tmp_path / "transformer_training.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["arm"] for row in rows] == ["post-nowarm"] * 6 + ["post-isqrt-ls"] * 6
    by_arm = {name: [r for r in rows if r["arm"] == name] for name in arms.split(",")}
    # learning rates are the schedules' values at iterations 0..5
    lr_cosine = [float(r["lr"]) for r in by_arm["post-nowarm"]]
    assert lr_cosine[0] == pytest.approx(3e-3, rel=1e-5) and np.all(np.diff(lr_cosine) < 0)
    lr_isqrt = [float(r["lr"]) for r in by_arm["post-isqrt-ls"]]
    expected = [3e-3 * min(n / 3, (3 / n) ** 0.5) for n in range(1, 7)]
    np.testing.assert_allclose(lr_isqrt, expected, rtol=1e-5)
    # the smoothed arm optimizes a larger loss than its plain cross-entropy; the other equal
    assert all(float(r["loss"]) > float(r["nll"]) for r in by_arm["post-isqrt-ls"])
    assert all(r["loss"] == r["nll"] for r in by_arm["post-nowarm"])
    table = (tmp_path / "transformer_training.md").read_text().splitlines()
    assert len(table) == 4 and table[2].startswith("| post-nowarm | post-LN, no warm-up |")
    assert "wrote" in capsys.readouterr().out


def test_unknown_arm_is_a_usage_error(tmp_path):
    example = load_example()
    with pytest.raises(SystemExit) as raised:
        example.main(["--out", str(tmp_path), "--arms", "post-nowarm,nope"])
    assert raised.value.code == 2
