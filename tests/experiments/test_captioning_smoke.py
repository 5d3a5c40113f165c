"""experiments/captioning.py: configs, flags, tables; the whole pipeline on `--quick`."""

import importlib.util
import json
import pathlib
import sys

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "captioning.py"


@pytest.fixture(scope="module")
def experiment():
    spec = importlib.util.spec_from_file_location("captioning_experiment", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_both_arms_get_the_same_budget_and_differ_only_in_attention(experiment):
    soft = experiment.train_config("soft", experiment.FULL, 3)
    hard = experiment.train_config("hard", experiment.FULL, 3)
    soft.validate()
    hard.validate()
    different = {
        name for name in soft.__dataclass_fields__ if getattr(soft, name) != getattr(hard, name)
    }
    assert different == {"options"}
    assert {name for name in soft.options if soft.options[name] != hard.options[name]} == {
        "attention"
    }
    assert (soft.model, soft.corpus, soft.seed) == ("show-attend-tell", "scenes", 3)
    assert soft.max_cpu_minutes == experiment.FULL.cpu_minutes > 0
    assert soft.options["penalty"] == experiment.FULL.penalty


def test_parse_args_overrides_the_scale_and_rejects_bad_values(experiment, capsys):
    args = experiment.parse_args(["--out", "x", "--steps", "7", "--penalty", "0", "--quick"])
    assert (args.scale.steps, args.scale.penalty, args.scale.corpus) == (7, 0.0, "scenes-32")
    errors = {
        ("--steps", "0"): "--steps must be at least 1, got 0",
        ("--cpu-minutes", "0"): "--cpu-minutes must be positive, got 0.0",
        ("--penalty", "-1"): "--penalty must be >= 0, got -1.0",
        ("--eval-scenes", "0"): "--eval-scenes must be at least 1, got 0",
        ("--workers", "0"): "--workers must be at least 1, got 0",
        ("--arms", "soft", "greedy"): "invalid choice: 'greedy'",
    }
    for argv, message in errors.items():
        with pytest.raises(SystemExit):
            experiment.parse_args(["--out", "x", *argv])
        assert message in capsys.readouterr().err


def test_worker_argv_replaces_arms_workers_and_threads(experiment):
    argv = ["--out", "o", "--arms", "soft", "hard", "--workers=2", "--steps", "5", "--threads", "1"]
    assert experiment.worker_argv(argv, "hard", 4) == [
        "--out", "o", "--steps", "5", "--arms", "hard", "--workers", "1", "--threads", "4",
    ]  # fmt: skip


def _check(share, uniform):
    return {
        "nouns": 10,
        "grounded": 8,
        "share": share,
        "uniform": uniform,
        "ratio": share / uniform,
        "exact": 5,
        "exact_share": share,
        "exact_uniform": uniform,
        "exact_ratio": share / uniform,
        "phrase_shares": [None, 0.1, 0.2, share],
    }


def test_format_tables(experiment):
    split = {
        "bleu": 41.234,
        "exact_match": 0.125,
        "by_objects": {"1": {"scenes": 4, "exact_match": 0.5}},
        "attention": _check(0.3, 0.1),
    }
    metrics = {
        "steps": 100,
        "train_cpu_seconds_this_session": 60.4,
        "train_seconds_this_session": 90.6,
        "final_loss": 1.23456,
        "dev_bleu": 40.0,
    }
    evaluation = {"metrics": metrics, "test": split, "unseen": split}
    lines = experiment.format_tables({"soft": evaluation}).splitlines()
    assert lines[2] == "| soft | 100 | 60 | 91 | 1.235 | 40.00 |"
    assert lines[6] == "| soft | 41.23 | 12.5 | 41.23 | 12.5 |"
    assert lines[10] == "| soft, test | 50.0 (4) |"
    assert lines[15] == "| soft, test | 10 | 8 | 30.0 | 10.0 | 3.00 | 5 | 30.0 | 10.0 | 3.00 |"
    assert lines[20:22] == [
        "| soft, test |  | 10.0 | 20.0 | 30.0 | 10.0 |",
        "| soft, unseen |  | 10.0 | 20.0 | 30.0 | 10.0 |",
    ]


def test_quick_run_trains_both_arms_scores_and_reports(experiment, tmp_path):
    out = tmp_path / "out"
    assert experiment.main(["--quick", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert list(results["arms"]) == ["soft", "hard"]
    for arm, evaluation in results["arms"].items():
        config = json.loads((out / arm / "run" / "config.json").read_text())
        assert (config["options"]["attention"], config["steps"]) == (arm, 4)
        assert config["corpus"] == "scenes-32"
        assert evaluation["metrics"]["steps"] == 4 and evaluation["grid"] == [4, 4]
        for split in ("test", "unseen"):
            scores = evaluation[split]
            assert scores["scenes"] == 8 and 0.0 <= scores["exact_match"] <= 1.0
            assert sum(c["scenes"] for c in scores["by_objects"].values()) == 8
            check = scores["attention"]
            assert check["grounded"] <= check["nouns"]
            if check["grounded"]:
                assert 0.0 <= check["share"] <= 1.0 and 0.0 < check["uniform"] <= 1.0
            rows = (out / arm / f"captions_{split}.tsv").read_text().splitlines()
            assert rows[0] == "reference\tcaption" and len(rows) == 9
    markdown = (out / "results.md").read_text()
    assert "| soft, unseen |" in markdown and "| hard, test |" in markdown
    # Everything finished: a second run trains and scores nothing and writes the same tables.
    before = (out / "hard" / "run" / "model.keras").stat().st_mtime_ns
    assert experiment.main(["--quick", "--out", str(out), "--arms", "hard"]) == 0
    assert (out / "hard" / "run" / "model.keras").stat().st_mtime_ns == before
    assert (out / "results.md").read_text() == markdown
