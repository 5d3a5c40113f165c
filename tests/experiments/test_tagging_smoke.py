"""experiments/tagging.py: the two arms' configs and the table (the pipeline itself is the
trainer's, tested in tests/training/test_classification_tasks.py)."""

import importlib.util
import pathlib
import sys

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "tagging.py"


@pytest.fixture(scope="module")
def experiment():
    spec = importlib.util.spec_from_file_location("tagging_experiment", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_both_arms_get_the_same_fine_tuning_budget(experiment, tmp_path):
    args = experiment.parse_args(["--out", str(tmp_path)])
    scale = args.scale
    pre, scratch = (
        experiment.finetuning_config(arm, 50, 1, scale, args, tmp_path) for arm in experiment.ARMS
    )
    fields = ("model", "corpus", "train_examples", "steps", "batch_size", "learning_rate")
    fields += ("warmup_steps", "schedule", "seed", "max_length", "options")
    assert [getattr(pre, f) for f in fields] == [getattr(scratch, f) for f in fields]
    assert (pre.model, pre.corpus, pre.train_examples) == ("bart-tagger", "synthetic-tags", 50)
    bart = str(tmp_path / "pretrain" / "bart")
    assert (pre.init_from, pre.vocab_from) == (bart, None)
    assert (scratch.init_from, scratch.vocab_from) == (None, bart)
    pretraining = experiment.pretraining_config(scale, args)
    assert (pretraining.model, pretraining.corpus, pretraining.side) == (
        "bart",
        "synthetic",
        "target",
    )
    assert (pretraining.max_length, pretraining.options) == (pre.max_length, pre.options)
    for config in (pre, scratch, pretraining):
        config.validate()
    with pytest.raises(SystemExit):
        experiment.parse_args(["--out", "x", "--seeds", "3"])


def test_table_gives_each_arm_its_seed_range_and_the_gain_against_the_spread(experiment):
    def result(arm, seed, dev, test):
        return {"arm": arm, "budget": 50, "seed": seed,
                "metrics": {"dev_accuracy": dev, "test_accuracy": test}}  # fmt: skip

    results = [
        result("BART pre-trained", 0, 0.90, 0.91), result("BART pre-trained", 1, 0.92, 0.93),
        result("BART from scratch", 0, 0.70, 0.90), result("BART from scratch", 1, 0.80, 0.94),
    ]  # fmt: skip
    lines = experiment.format_table(results, [50]).splitlines()
    assert lines[2] == "| BART pre-trained | 50 | 91.0 (90.0–92.0) | 92.0 (91.0–93.0) |"
    assert lines[3] == "| BART from scratch | 50 | 75.0 (70.0–80.0) | 92.0 (90.0–94.0) |"
    # dev: +16 points against a spread of 10 (scratch's); test: +0 against 4.
    assert (
        lines[4]
        == "| gain pre-trained − from scratch (vs spread) | 50 | +16.0 > 10.0 | +0.0 ≤ 4.0 |"
    )


def test_most_frequent_tag_reference_folds_case_and_falls_back_to_the_commonest_tag(experiment):
    train = [(("the", "open", "door"), (0, 1, 2)), (("They", "open", "it", "so"), (3, 4, 3, 3))]
    train += [(("open",), (4,))]
    # "open": 4 (twice) over 1; "The" is "the": 0; "cat" is unseen: the commonest tag, 3 (three
    # times, against 4 twice).
    evaluated = [(("The", "open", "cat"), (0, 4, 1))]
    assert experiment.most_frequent_tag_accuracy(train, evaluated) == pytest.approx(2 / 3)
