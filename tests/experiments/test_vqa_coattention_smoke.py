"""experiments/vqa_coattention.py: the whole pipeline on `--quick`, and its table."""

import importlib.util
import json
import pathlib
import sys

_PATH = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "vqa_coattention.py"


def load():
    spec = importlib.util.spec_from_file_location("vqa_coattention_experiment", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_quick_run_writes_the_table_by_question_type(tmp_path):
    experiment = load()
    assert experiment.main(["--quick", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())["results"]["0"]
    table = (tmp_path / "results.md").read_text().splitlines()
    assert table[0] == "| question type | test questions | seed 0: accuracy (majority answer) |"
    for kind in ("colour", "shape", "exists", "count"):
        row = next(line for line in table if line.startswith(f"| {kind} |"))
        accuracy, majority = results[f"accuracy_{kind}"], results[f"majority_{kind}"]
        assert row.endswith(f"| {accuracy:.1%} ({majority:.1%}) |")
        assert 0.0 <= results[f"majority_{kind}"] <= 1.0
    assert results["attention_uniform"] > 0.0
    # a second call finds the finished run and does not train it again
    before = (tmp_path / "seed-0" / "run" / "model.keras").stat().st_mtime_ns
    assert experiment.main(["--quick", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "seed-0" / "run" / "model.keras").stat().st_mtime_ns == before
