import dataclasses
import importlib.util
import json
import re
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "pretrained_translator.py"


def load_example():
    spec = importlib.util.spec_from_file_location("pretrained_translator", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_both_translators_get_the_same_budget_and_differ_only_in_their_start(tmp_path):
    example = load_example()
    args = example.parse_args(["--seed", "3", "--train-pairs", "500", "--finetune-steps", "70"])
    configs = example.configs(args, tmp_path)
    mbart, pretrained, scratch = configs["mbart"], configs["pretrained"], configs["scratch"]
    assert (mbart.model, mbart.side, mbart.steps, mbart.train_examples) == (
        "bart",
        "both",
        2000,
        None,
    )
    assert pretrained.init_from == scratch.vocab_from == str(tmp_path / "mbart")
    assert pretrained.vocab_from is None and scratch.init_from is None
    differences = {
        name
        for name, value in dataclasses.asdict(pretrained).items()
        if getattr(scratch, name) != value
    }
    assert differences == {"init_from", "vocab_from"}
    assert (scratch.model, scratch.steps, scratch.train_examples, scratch.seed) == (
        "bart-translator",
        70,
        500,
        3,
    )
    for name in ("options", "corpus", "batch_size"):  # options: num_layers, d_model, ...
        assert getattr(scratch, name) == getattr(mbart, name), name
    assert set(scratch.options) == {"num_layers", "d_model", "num_heads", "ff_dim"}
    for config in configs.values():
        config.validate()


@pytest.mark.parametrize("flag", ["--train-pairs", "--finetune-steps"])
def test_budgets_must_be_positive(flag, capsys):
    with pytest.raises(SystemExit) as exited:
        load_example().parse_args([flag, "0"])
    assert exited.value.code == 2
    assert f"{flag} must be positive, got 0" in capsys.readouterr().err


@pytest.mark.slow  # three trainings: a few minutes
def test_quick_run_prints_both_dev_bleus_and_pretraining_wins(tmp_path, capsys):
    """--quick on `synthetic`, seed 0. Measured over seeds 0, 1 and 2 (dev BLEU, pre-trained vs
    scratch): 23.50 vs 1.26, 14.05 vs 0.88 and 23.78 vs 1.82; the test asks for a gain over 5."""
    example = load_example()
    assert example.main(["--quick", "--seed", "0", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    bleus = dict(re.findall(r"^(pretrained|scratch)\s+dev BLEU\s+([\d.]+)$", out, re.M))
    assert set(bleus) == {"pretrained", "scratch"}
    runs = tmp_path / "seed0"
    for arm, bleu in bleus.items():
        metrics = json.loads((runs / arm / "metrics.json").read_text())
        assert metrics["steps"] == 300
        assert float(bleu) == pytest.approx(metrics["dev_bleu"], abs=5e-3)
    gain = float(re.search(r"^gain from pre-training: ([+-][\d.]+) BLEU$", out, re.M).group(1))
    assert gain == pytest.approx(float(bleus["pretrained"]) - float(bleus["scratch"]), abs=0.011)
    assert gain > 5.0
    loaded = json.loads((runs / "pretrained" / "init_from.json").read_text())["loaded"]
    assert {"embedding", "encoder", "decoder"} <= set(loaded)
    assert not (runs / "scratch" / "init_from.json").exists()
    # The runs are kept: a second call into the same --out is refused in one line.
    assert example.main(["--quick", "--seed", "0", "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("pretrained_translator: error: ") and len(error.splitlines()) == 1
