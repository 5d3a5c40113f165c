"""experiments/pretraining.py: configs, cells, gains, tables; the whole pipeline on `--quick`."""

import importlib.util
import json
import pathlib
import sys

import numpy as np
import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "pretraining.py"


@pytest.fixture(scope="module")
def experiment():
    spec = importlib.util.spec_from_file_location("pretraining_experiment", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _results(task, values):
    """Results as `run_task` returns them: `{(arm, budget): [value per seed]}` flattened."""
    return [
        {"task": task, "arm": arm, "budget": budget, "seed": seed, "value": value}
        for (arm, budget), seeds in values.items()
        for seed, value in enumerate(seeds)
    ]


def test_summarize_and_gain_against_the_seed_spread(experiment):
    s = experiment.summarize([0.70, 0.74, 0.72])
    assert s["mean"] == pytest.approx(0.72) and s["spread"] == pytest.approx(0.04)
    assert (s["min"], s["max"], s["seeds"]) == (0.70, 0.74, 3)
    # Gain 0.05 over spreads 0.02 and 0.04: it exceeds the larger one.
    g = experiment.gain([0.80, 0.82], [0.73, 0.77])
    assert g["gain"] == pytest.approx(0.06) and g["spread"] == pytest.approx(0.04)
    assert g["exceeds"]
    # Gain 0.01 within a spread of 0.1: it does not; a loss never does.
    assert not experiment.gain([0.80, 0.82], [0.75, 0.85])["exceeds"]
    assert not experiment.gain([0.60, 0.60], [0.70, 0.70])["exceeds"]
    assert experiment.gain([0.6, 0.6], [0.7, 0.7])["gain"] == pytest.approx(-0.1)


def test_format_table_cells_ranges_and_gain_rows(experiment):
    values = {
        ("BERT pre-trained", "50"): [0.80, 0.84],
        ("BERT from scratch", "50"): [0.60, 0.70],
        ("BERT pre-trained", "all"): [0.95, 0.95],
        ("BERT from scratch", "all"): [0.94, 0.96],
        ("text-CNN", "50"): [0.5, 0.5],
    }
    table = experiment.format_table(
        "classification", _results("classification", values), ["50", "all"]
    )
    lines = table.splitlines()
    assert lines[0] == "| test accuracy % (per class) | 50 | all |"
    assert lines[2] == "| BERT pre-trained | 82.0 (80.0–84.0) | 95.0 (95.0–95.0) |"
    assert lines[3] == "| BERT from scratch | 65.0 (60.0–70.0) | 95.0 (94.0–96.0) |"
    assert lines[4] == "| text-CNN | 50.0 (50.0–50.0) |  |"
    # 82 - 65 = +17 points against a spread of 10 (scratch's); at "all": +0 against 2.
    assert (
        lines[5]
        == "| gain BERT pre-trained − BERT from scratch (vs spread) | +17.0 > 10.0 | +0.0 ≤ 2.0 |"
    )
    assert lines[6] == "| gain GPT pre-trained − GPT from scratch (vs spread) |  |  |"
    bleu = {
        ("mBART pre-trained", "1000"): [3.0, 4.0],
        ("Transformer from scratch", "1000"): [1.0, 1.5],
    }
    table = experiment.format_table("translation", _results("translation", bleu), ["1000"])
    assert "| mBART pre-trained | 3.50 (3.00–4.00) |" in table.splitlines()
    assert (
        "| gain mBART pre-trained − Transformer from scratch (vs spread) | +2.25 > 1.00 |" in table
    )


def test_cells_cover_every_arm_budget_and_seed_and_short_runs_at_the_smallest_budget(experiment):
    scale = experiment.FULL
    jobs = experiment.cells("classification", scale, [0, 1])
    assert len(jobs) == 5 * 4 * 2 + 2 * 2 + 2 * 2 * 2
    longer = [(arm.name, budget) for arm, budget, _ in jobs if arm.steps_factor > 1]
    assert set(longer) == {
        (f"BERT {start} (5× steps)", budget)
        for start in ("pre-trained", "from scratch")
        for budget in (50, experiment.ALL)
    }
    short = [
        (arm.name, budget) for arm, budget, _ in jobs if arm.init and arm.init.endswith("-short")
    ]
    assert set(short) == {("BERT pre-trained (short)", 50), ("GPT pre-trained (short)", 50)}
    translation = experiment.cells("translation", scale, [3, 4])
    assert len(translation) == 3 * 3 * 2 + 2 * 2
    assert {seed for _, _, seed in translation} == {3, 4}
    assert {budget for _, budget, _ in translation} == {1000, 5000, experiment.ALL}
    chosen = experiment.cells("translation", scale, [0, 1], ["bertsum"])
    assert [(arm.name, budget, seed) for arm, budget, seed in chosen][:2] == [
        ("BertSum", 1000, 0), ("BertSum", 1000, 1),
    ]  # fmt: skip
    assert len(chosen) == 6


def test_both_arms_of_a_comparison_get_the_same_fine_tuning_budget(experiment, tmp_path):
    args = experiment.parse_args(["--out", str(tmp_path)])
    scale = args.scale
    arms = {
        arm.name: arm
        for task in experiment.TASKS
        for arm in (
            *experiment.ARMS[task],
            *experiment.SMALLEST_ARMS[task],
            *experiment.LONGER_ARMS[task],
        )
    }
    budget_fields = ("steps", "batch_size", "learning_rate", "warmup_steps", "schedule", "seed")
    for task, pairs in experiment.COMPARISONS.items():
        for treated, control in pairs:
            for budget in experiment.task_budgets(task, scale):
                a = experiment.finetuning_config(
                    arms[treated], task, budget, 1, scale, args, tmp_path
                )
                b = experiment.finetuning_config(
                    arms[control], task, budget, 1, scale, args, tmp_path
                )
                assert [getattr(a, f) for f in budget_fields] == [
                    getattr(b, f) for f in budget_fields
                ]
                assert (a.corpus, a.train_examples, a.examples_per_class) == (
                    b.corpus, b.train_examples, b.examples_per_class,
                )  # fmt: skip
                a.validate()
                b.validate()
    pre = experiment.finetuning_config(
        arms["BERT pre-trained"], "classification", 50, 0, scale, args, tmp_path
    )
    scratch = experiment.finetuning_config(
        arms["BERT from scratch"], "classification", 50, 0, scale, args, tmp_path
    )
    assert pre.init_from == str(tmp_path / "pretrain" / "bert") and pre.vocab_from is None
    assert scratch.vocab_from == str(tmp_path / "pretrain" / "bert") and scratch.init_from is None
    assert (pre.examples_per_class, pre.train_examples) == (50, None)
    assert pre.options == {"num_layers": 2, "d_model": 128, "num_heads": 4, "ff_dim": 256}
    everything = experiment.finetuning_config(
        arms["BERT pre-trained"], "classification", "all", 0, scale, args, tmp_path
    )
    assert everything.examples_per_class is None
    pairs = experiment.finetuning_config(
        arms["mBART pre-trained"], "translation", 1000, 0, scale, args, tmp_path
    )
    assert (pairs.train_examples, pairs.examples_per_class, pairs.corpus) == (
        1000,
        None,
        "libreoffice-es-en",
    )
    bertsum = experiment.finetuning_config(
        arms["BertSum"], "translation", 1000, 0, scale, args, tmp_path
    )
    assert bertsum.encoder_learning_rate == pytest.approx(0.2 * args.learning_rate)
    assert bertsum.encoder_warmup_steps == 4 * args.warmup_steps
    long_arms = {arm.name: arm for arm in experiment.LONGER_ARMS["classification"]}
    longer = experiment.finetuning_config(
        long_arms["BERT from scratch (5× steps)"], "classification", "all", 0, scale, args, tmp_path
    )
    assert longer.steps == 5 * scale.classification_steps == 5 * pre.steps
    assert long_arms["BERT from scratch (5× steps)"].slug == "bert-from-scratch-5x-steps"
    control = experiment.finetuning_config(
        arms["BertSum from scratch"], "translation", 1000, 0, scale, args, tmp_path
    )
    assert control.vocab_from == str(tmp_path / "pretrain" / "bert") and control.init_from is None
    assert control.encoder_learning_rate == bertsum.encoder_learning_rate
    cnn = experiment.finetuning_config(
        arms["text-CNN"], "classification", 200, 0, scale, args, tmp_path
    )
    assert cnn.options == {"embedding_dim": 128, "dropout": 0.1} and cnn.init_from is None
    assert cnn.vocab_from is None
    cnn.validate()


def test_pretraining_configs_share_the_model_and_split_the_cpu_budget(experiment, tmp_path):
    args = experiment.parse_args(["--out", str(tmp_path), "--pretraining-steps", "1000"])
    assert experiment.short_steps(args) == 250
    for run in experiment.PRETRAININGS.values():
        config = experiment.pretraining_config(run, args.scale, args)
        config.validate()
        assert config.schedule == "inverse-sqrt"  # the short run is the long run's prefix
        assert (config.steps, config.max_cpu_minutes) == (1000, args.scale.pretraining_cpu_minutes)
        assert (config.options["num_layers"], config.options["d_model"]) == (2, 128)
        assert config.train_examples is None
    assert experiment.PRETRAININGS["mbart"].side == "both"


def test_parse_args_rejects_one_seed_bad_fractions_and_unknown_arms(experiment, capsys):
    errors = {
        ("--seeds", "3"): "--seeds needs at least two different seeds, got [3]",
        ("--seeds", "3", "3"): "--seeds needs at least two different seeds, got [3, 3]",
        ("--short-fraction", "1"): "--short-fraction must be in (0, 1), got 1.0",
        ("--pretraining-steps", "1"): "--pretraining-steps must be at least 2, got 1",
        ("--arms", "no-such-arm"): "invalid choice: 'no-such-arm'",
    }
    for argv, message in errors.items():
        with pytest.raises(SystemExit):
            experiment.parse_args(["--out", "x", *argv])
        assert message in capsys.readouterr().err


def test_cost_table_sums_the_short_and_full_sessions_and_skips_missing_metrics(
    experiment, tmp_path
):
    scale = experiment.FULL
    for name, steps, wall, cpu in (("bert-short", 400, 280.0, 60.0), ("bert", 1800, 400.0, 180.0)):
        run = tmp_path / "pretrain" / name
        run.mkdir(parents=True)
        (run / "model.keras").write_text("")
        metrics = {
            "steps": steps,
            "train_seconds_this_session": wall,
            "train_cpu_seconds_this_session": cpu,
            "dev_mlm_accuracy": 0.1,
            "dev_mlm_perplexity": 300.0,
        }
        (run / "metrics.json").write_text(json.dumps(metrics))
    rows = experiment.pretraining_cost(tmp_path, scale)
    assert [(r["run"], r["steps"], r["train_seconds"], r["train_cpu_seconds"]) for r in rows] == [
        ("bert-short", 400, 280.0, 60.0), ("bert", 1800, 680.0, 240.0),
    ]  # fmt: skip
    table = experiment.format_cost_table(rows).splitlines()
    corpora = "ding-de-en,bible-es-en,libreoffice-es-en (both)"
    metrics = "mlm_accuracy 0.1, mlm_perplexity 300.0"  # no NSP accuracy recorded: left out
    assert table[3] == f"| bert | bert | {corpora} | 1800 | 680.0 | 240.0 | {metrics} |"


def test_claimed_is_exclusive_and_does_not_wait_when_told_not_to(experiment, tmp_path):
    lock = tmp_path / "cell.lock"
    with experiment.claimed(lock, wait=False) as first:
        with experiment.claimed(lock, wait=False) as second:
            assert first and not second
    with experiment.claimed(lock, wait=True) as again:
        assert again  # released when the first holder's block ended


def test_loss_at_and_curve_steps_read_the_train_log(experiment, tmp_path):
    losses = np.linspace(5.0, 1.0, 20)
    rows = "".join(f"{step}\t{float(loss)!r}\t0.5\n" for step, loss in enumerate(losses, start=1))
    (tmp_path / "train_log.tsv").write_text("step\tloss\ttoken_accuracy\n" + rows)
    points = experiment.loss_at(tmp_path, [4, 20, 30], window=4)
    assert points[0] == pytest.approx(losses[:4].mean())
    assert points[1] == pytest.approx(losses[16:].mean())
    assert points[2] is None  # past the run's end
    assert experiment.curve_steps(3000) == [500, 1000, 1500, 2000, 2500, 3000]
    assert experiment.curve_steps(4, points=6) == [1, 2, 3, 4]


@pytest.mark.slow
def test_quick_run_pretrains_fine_tunes_and_writes_the_tables(experiment, tmp_path):
    out = tmp_path / "out"
    argv = [
        "--quick",
        "--out",
        str(out),
        "--tasks",
        "classification",
        "--arms",
        "bert-pre-trained",
        "bert-from-scratch",
    ]
    assert experiment.main(argv) == 0
    pretrain = out / "pretrain"
    short = json.loads((pretrain / "bert-short" / "metrics.json").read_text())
    long = json.loads((pretrain / "bert" / "metrics.json").read_text())
    assert (short["steps"], long["steps"]) == (2, 8)
    assert long["steps_this_session"] == 6  # the full run continued the short one
    log = (pretrain / "bert" / "train_log.tsv").read_text().splitlines()[1:]
    assert [int(line.split("\t")[0]) for line in log] == list(range(1, 9))
    assert log[:2] == (pretrain / "bert-short" / "train_log.tsv").read_text().splitlines()[1:]
    init = json.loads(
        (out / "classification" / "bert-pre-trained" / "20-s0" / "init_from.json").read_text()
    )
    assert "encoder" in init["loaded"] and "classifier" in init["new"]
    results = json.loads((out / "results.json").read_text())["results"]
    assert [(r["arm"], r["seed"]) for r in results] == [
        ("BERT pre-trained", 0), ("BERT pre-trained", 1),
        ("BERT from scratch", 0), ("BERT from scratch", 1),
    ]  # fmt: skip
    for result in results:
        assert 0.0 <= result["value"] <= 1.0 and result["metrics"]["steps"] == 4
    markdown = (out / "results.md").read_text()
    assert "| bert | bert | synthetic (both) | 8 |" in markdown
    assert "| bert-short | bert | synthetic (both) | 2 |" in markdown
    assert "| test accuracy % (per class) | 20 |" in markdown
    assert "| gain BERT pre-trained − BERT from scratch (vs spread) | " in markdown
    assert (out / "curves.png").stat().st_size > 0
    # Everything finished: a second run trains nothing and writes the same tables.
    before = (pretrain / "bert" / "model.keras").stat().st_mtime_ns
    assert experiment.main(argv) == 0
    assert (pretrain / "bert" / "model.keras").stat().st_mtime_ns == before
    assert (out / "results.md").read_text() == markdown
