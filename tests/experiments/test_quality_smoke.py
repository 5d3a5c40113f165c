"""experiments/quality.py: bucketing, BLEU by bucket, alignment shape, tables; training is slow."""

import dataclasses
import importlib.util
import json
import pathlib
import sys

import numpy as np
import pytest
import sacrebleu

_PATH = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "quality.py"


@pytest.fixture(scope="module")
def quality():
    spec = importlib.util.spec_from_file_location("quality_experiment", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_buckets_by_source_words(quality):
    assert quality.bucket_labels((4, 8, 12)) == ["1-4", "5-8", "9-12", "13+"]
    lengths = [1, 4, 5, 8, 9, 12, 13, 40]
    assert [quality.bucket_index(n, (4, 8, 12)) for n in lengths] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert quality.source_length("  Wir  werden mit E-Mails\tzugeschüttet. ") == 5
    for bad in [(), (4, 4), (8, 4), (0, 5)]:
        with pytest.raises(ValueError, match="increasing positive bucket edges"):
            quality.bucket_labels(bad)
    with pytest.raises(SystemExit):
        quality.parse_args(["--out", "x", "--bucket-edges", "8", "4"])


def test_bleu_by_bucket_is_corpus_bleu_of_each_buckets_sentences(quality):
    # Sources of 3, 6, 7 and 15 words; edges (4, 8, 12) put them in buckets 0, 1, 1 and 3.
    sources = ["a b c", "a b c d e f", "a b c d e f g", " ".join("w" * 15)]
    references = [
        "the cat sat on the mat today",
        "we get bombarded with e-mails from everyone",
        "there is still some work to complete before the report",
        "the broadcaster is expected to overspend by two million this year",
    ]
    hypotheses = [
        references[0],  # exact: BLEU 100
        "we get bombarded with letters from everyone",
        "there is some work left before the report",
        "completely unrelated words here",  # no 4-gram (nor 2-gram) match: BLEU 0
    ]
    buckets = quality.bleu_by_bucket(sources, hypotheses, references, (4, 8, 12))
    assert [(b["bucket"], b["sentences"]) for b in buckets] == [
        ("1-4", 1), ("5-8", 2), ("9-12", 0), ("13+", 1),
    ]  # fmt: skip
    assert buckets[0]["bleu"] == pytest.approx(100.0)
    expected = sacrebleu.corpus_bleu(hypotheses[1:3], [references[1:3]]).score
    assert buckets[1]["bleu"] == pytest.approx(expected) and 10.0 < expected < 90.0
    assert buckets[2]["bleu"] is None and buckets[3]["bleu"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="4 sources, 3 hypotheses"):
        quality.bleu_by_bucket(sources, hypotheses[:3], references, (4, 8, 12))


def test_alignment_monotonicity_counts_reorderings(quality):
    diagonal = np.eye(4) * 0.9 + 0.025
    assert quality.alignment_monotonicity(diagonal, 4, 4) == {"monotone": 1.0, "crossings": 0}
    # peaks 0, 2, 1, 3: one step back out of three (adjective-noun swap)
    swapped = diagonal[[0, 2, 1, 3]]
    assert quality.alignment_monotonicity(swapped, 4, 4) == {
        "monotone": pytest.approx(2 / 3),
        "crossings": 1,
    }
    # only the real block counts: a padded column with a large weight is ignored
    padded = np.pad(diagonal, ((0, 1), (0, 2)))
    padded[:, 5] = 5.0
    assert quality.alignment_monotonicity(padded, 4, 4)["crossings"] == 0
    assert quality.alignment_monotonicity(np.zeros((3, 5)), 3, 5) == {
        "monotone": None,
        "crossings": 0,
    }


def test_format_table_rows(quality):
    result = {
        "arm": "Bahdanau", "steps": 812, "train_cpu_seconds": 183.0, "parameters": 1_860_000,
        "bleu": 12.345,
        "buckets": [
            {"bucket": "1-4", "sentences": 10, "bleu": 20.0},
            {"bucket": "5+", "sentences": 0, "bleu": None},
        ],
        "monotone": 0.876, "crossing_share": 0.25, "recent_loss": 1.6789,
    }  # fmt: skip
    plain = dict(result, arm="no attention", monotone=None, crossing_share=None)
    del plain["recent_loss"]
    table = quality.format_table([result, plain], (4,)).splitlines()
    assert table[0] == (
        "| model | steps | CPU min | params | BLEU | 1-4 (n=10) | 5+ (n=0) | train loss "
        "| monotone | crossing sents |"
    )
    assert table[2] == "| Bahdanau | 812 | 3.0 | 1.86 M | 12.35 | 20.00 | – | 1.68 | 0.88 | 25% |"
    assert table[3] == "| no attention | 812 | 3.0 | 1.86 M | 12.35 | 20.00 | – | – | – | – |"


def test_recent_loss_is_the_mean_of_the_last_logged_steps(quality, tmp_path):
    rows = "".join(f"{step}\t{10.0 - step}\t0.5\n" for step in range(1, 11))
    (tmp_path / "train_log.tsv").write_text("step\tloss\ttoken_accuracy\n" + rows + "11\t0.")
    assert quality.recent_loss(tmp_path, last=4) == pytest.approx(np.mean([3.0, 2.0, 1.0, 0.0]))
    assert quality.recent_loss(tmp_path) == pytest.approx(4.5)  # fewer rows than `last`: all
    assert quality.recent_loss(tmp_path / "missing") is None


def test_finished_training_needs_the_model_the_metrics_and_the_same_config(quality, tmp_path):
    argv = ["--corpora", "synthetic", "--budget-minutes", "3", "--out", str(tmp_path / "out")]
    arm = quality.ARMS[0]
    config = quality.arm_config(arm, "synthetic", quality.parse_args(argv))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(config)))
    (run_dir / "model.keras").write_bytes(b"saved")
    assert quality.finished_training(run_dir, config) is None  # killed before metrics.json
    (run_dir / "metrics.json").write_text(json.dumps({"steps": 7}))
    assert quality.finished_training(run_dir, config) == {"steps": 7}
    other = quality.arm_config(arm, "synthetic", quality.parse_args([*argv, "--seed", "1"]))
    assert quality.finished_training(run_dir, other) is None  # another seed: train again
    (run_dir / "model.keras").unlink()
    assert quality.finished_training(run_dir, config) is None


def test_arm_config_turns_sgd_halving_passes_into_steps(quality):
    args = quality.parse_args(["--corpora", "synthetic", "--batch-size", "64", "--out", "unused"])
    by_slug = {arm.slug: arm for arm in quality.ARMS}
    config = quality.arm_config(by_slug["luong-local-p-sgd"], "synthetic", args, train_pairs=27252)
    config.validate()
    assert (config.optimizer, config.learning_rate, config.clipnorm) == ("sgd", 4.0, 1.0)
    assert (config.schedule, config.warmup_steps) == ("halving", 0)
    assert (config.decay_start, config.decay_every) == (5 * 425, 425)  # 27252 // 64 = 425
    assert (config.options["score"], config.options["attention"]) == ("general", "local-p")
    adam = quality.arm_config(by_slug["luong-local-p"], "synthetic", args)  # no split needed
    assert (adam.optimizer, adam.schedule, adam.warmup_steps) == ("adam", "inverse-sqrt", 100)
    assert adam.decay_start is None and adam.decay_every is None
    with pytest.raises(ValueError, match="needs the training split's size"):
        quality.arm_config(by_slug["luong-dot-sgd"], "synthetic", args)
    sgd = [arm for arm in quality.ARMS if arm.options.get("optimizer") == "sgd"]
    assert [arm.slug for arm in sgd] == [
        "no-attention-sgd", "luong-dot-sgd", "luong-general-sgd", "luong-local-p-sgd",
        "luong-local-p-dot-sgd", "luong-local-p-sgd-slow-predictor",
        "luong-local-p-dot-sgd-slow-predictor",
    ]  # fmt: skip
    for slug, score in (("luong-local-p-sgd", "general"), ("luong-local-p-dot-sgd", "dot")):
        slow = quality.arm_config(by_slug[f"{slug}-slow-predictor"], "synthetic", args, 27252)
        slow.validate()
        assert slow.model_hyperparameters()["position_gradient_scale"] == 0.1
        # the same run as the arm without the suffix but for the predictor's rate
        plain = quality.arm_config(by_slug[slug], "synthetic", args, 27252)
        assert (slow.options["score"], plain.options["score"]) == (score, score)
        options = {**slow.options, "position_gradient_scale": 1.0}
        assert dataclasses.replace(slow, options=options) == plain


def test_the_adam_arms_train_at_their_familys_rate_on_a_time_budgets_schedule(quality):
    """The tables' peak rate and warm-up are the family's defaults (what `keras-attn train` gives
    with no tuning flag); their schedule is inverse-sqrt, which needs no step target."""
    from keras_attn.models import get_family

    args = quality.parse_args(["--corpora", "synthetic", "--out", "unused"])
    adam = [arm for arm in quality.ARMS if "optimizer" not in arm.options]
    assert len(adam) >= 10
    for arm in adam:
        if arm.model == quality.KERAS_HUB_FAMILY:
            continue
        config = quality.arm_config(arm, "synthetic", args)
        defaults = get_family(arm.model).training_defaults()
        tuning = (config.learning_rate, config.warmup_steps, config.schedule)
        assert tuning == (defaults["learning_rate"], defaults["warmup_steps"], "inverse-sqrt")


def test_keras_hub_full_pass_steps_reproduce_the_teacher_forced_logits(quality):
    pytest.importorskip("keras_hub")
    model = quality.keras_hub_translator(
        30, 40, num_layers=1, d_model=16, num_heads=2, ff_dim=32, dropout=0.0, positions=12
    )
    source = np.array([[5, 6, 7, 0, 0], [8, 9, 0, 0, 0]], "int32")
    target = np.array([[2, 11, 12, 13], [2, 14, 0, 0]], "int32")
    logits = model({"source_ids": source, "target_ids": target}).numpy()
    wider = model({"source_ids": np.pad(source, ((0, 0), (0, 3))), "target_ids": target})
    np.testing.assert_allclose(wider.numpy(), logits, atol=1e-6)  # padding is masked
    steps = quality.FullPassSteps(model, max_length=6)
    state = steps.encode(source)
    for t in range(target.shape[1]):
        logits_t, state = steps.step(target[:, t], state)
        real = target[:, t] != 0
        np.testing.assert_allclose(logits_t.numpy()[real], logits[real, t], atol=1e-5)
    assert np.all(state["attention"].numpy() == 0.0)


def test_child_argv_keeps_the_run_options_and_names_one_arm(quality):
    argv = [
        "--corpora", "ding-de-en", "bible-es-en", "--budget-minutes", "20", "--workers", "2",
        "--arms=bahdanau", "--out", "OUT", "--bucket-edges", "4", "8",
    ]  # fmt: skip
    assert quality.child_argv(argv, "ding-de-en", "luong-dot") == [
        "--budget-minutes", "20", "--out", "OUT", "--bucket-edges", "4", "8",
        "--corpora", "ding-de-en", "--arms", "luong-dot", "--workers", "1",
    ]  # fmt: skip
    child = quality.parse_args(quality.child_argv(argv, "bible-es-en", "transformer"))
    assert (child.corpora, child.arms, child.workers) == (["bible-es-en"], ["transformer"], 1)
    assert child.budget_minutes == 20.0 and child.bucket_edges == [4, 8]


def test_heatmap_rows_default_to_mid_length_sentences_or_take_explicit_rows(quality):
    sources = ["a b c", "a b c d e f", "x " * 15, "one two three four five six seven", "s " * 7]
    args = quality.parse_args(["--out", "x", "--heatmaps", "2"])
    assert quality.heatmap_rows(sources, args) == [1, 3]
    args = quality.parse_args(["--out", "x", "--heatmap-rows", "4", "0"])
    assert quality.heatmap_rows(sources, args) == [4, 0]
    args = quality.parse_args(["--out", "x", "--heatmap-rows", "2", "5"])
    with pytest.raises(ValueError, match=r"--heatmap-rows \[5\] are outside the 5 test"):
        quality.heatmap_rows(sources, args)


def test_threads_per_worker_share_the_cores(quality):
    assert quality.threads_per_worker(2, cpus=2) == 1
    assert quality.threads_per_worker(2, cpus=16) == 8
    assert quality.threads_per_worker(4, cpus=2) == 1


def test_parse_args_rejects_bad_workers_and_abbreviations(quality, capsys):
    for argv, message in (
        (["--workers", "0", "--out", "x"], "--workers must be at least 1, got 0"),
        (["--work", "2", "--out", "x"], "unrecognized arguments: --work 2"),
    ):
        with pytest.raises(SystemExit):
            quality.parse_args(argv)
        assert message in capsys.readouterr().err


@pytest.mark.slow
def test_workers_train_the_arms_then_main_writes_tables_and_figures_and_reuses_them(
    quality, tmp_path
):
    out = tmp_path / "out"
    argv = [
        "--corpora", "synthetic", "--arms", "no-attention", "bahdanau", "luong-dot-sgd",
        "--workers", "2", "--budget-minutes", "0.02", "--test-sentences", "30",
        "--batch-size", "16", "--out", str(out),
    ]  # fmt: skip
    assert quality.main(argv) == 0  # three arms, two worker processes at a time
    results = json.loads((out / "results.json").read_text())["results"]["synthetic"]
    assert [r["arm"] for r in results] == ["no attention", "Bahdanau", "Luong dot SGD"]
    for result in results:
        assert result["steps"] >= 1 and result["test_sentences"] == 30
        assert result["train_cpu_seconds"] >= 0.02 * 60  # --clock cpu (the default)
        assert sum(b["sentences"] for b in result["buckets"]) == 30
    assert results[0]["monotone"] is None and results[1]["monotone"] is not None
    assert len(list((out / "synthetic" / "vocab").iterdir())) == 2  # built once, by the parent
    from keras_attn.text.corpora import load_corpus
    from keras_attn.training.trainer import RunDirectory

    # the worker process gave the SGD arm its halving steps from the synthetic training split
    config = RunDirectory(out / "synthetic" / "luong-dot-sgd" / "run").read_config()
    per_pass = len(load_corpus("synthetic", seed=0)["train"]) // 16
    assert (config.optimizer, config.schedule, config.learning_rate) == ("sgd", "halving", 4.0)
    assert (config.decay_start, config.decay_every) == (5 * per_pass, per_pass)
    adam = RunDirectory(out / "synthetic" / "no-attention" / "run").read_config()
    assert (adam.optimizer, adam.schedule, adam.decay_start) == ("adam", "inverse-sqrt", None)
    for name in ("bleu_by_length_synthetic.png", "alignments_synthetic.png", "results.md"):
        assert (out / name).stat().st_size > 0
    assert len((out / "synthetic" / "bahdanau" / "test.tsv").read_text().splitlines()) == 30
    # Killed after training, while translating: the next run translates the trained model again
    # (in this process: one arm left, no workers) and does not train it again.
    run_dir = out / "synthetic" / "bahdanau" / "run"
    first = json.loads((out / "synthetic" / "bahdanau" / "result.json").read_text())

    def trained():
        return (run_dir / "model.keras").stat().st_mtime_ns, (run_dir / "train_log.tsv").read_text()

    before_killed = trained()
    (out / "synthetic" / "bahdanau" / "result.json").unlink()
    assert quality.main(argv) == 0
    assert trained() == before_killed
    again = json.loads((out / "synthetic" / "bahdanau" / "result.json").read_text())
    assert again["steps"] == first["steps"]
    assert again["train_cpu_seconds"] == first["train_cpu_seconds"]
    assert quality.main(argv) == 0  # a second run reuses every arm's results
    before = json.loads((out / "synthetic" / "bahdanau" / "result.json").read_text())
    assert before["heatmap_rows"] == quality.heatmap_rows(
        [line.split("\t")[0] for line in (out / "synthetic" / "bahdanau" / "test.tsv").open()],
        quality.parse_args(argv),
    )
    assert quality.main([*argv, "--heatmap-rows", "3", "7"]) == 0  # reused, only heatmaps redrawn
    after = json.loads((out / "synthetic" / "bahdanau" / "result.json").read_text())
    assert after["heatmap_rows"] == [3, 7] and len(after["heatmaps"]) == 2
    assert {k: v for k, v in after.items() if not k.startswith("heatmap")} == {
        k: v for k, v in before.items() if not k.startswith("heatmap")
    }
    plain = json.loads((out / "synthetic" / "no-attention" / "result.json").read_text())
    assert plain["heatmap_rows"] == before["heatmap_rows"]  # no attention: nothing to redraw
    assert quality.main([*argv, "--heatmap-rows", "30"]) == 2  # test sentences are 0..29
