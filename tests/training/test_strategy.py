"""`keras-attn train --distribute none|mirrored|multiworker`.

The slow tests train the same run three ways in separate processes (TensorFlow fixes its devices
and collective ops at startup): on one device; mirrored over two logical CPU devices; as two
workers on 127.0.0.1 joined by TF_CONFIG. Each sees the same global batches, so the loss curve
and every variable, Adam's moments included (which would show gradients summed twice or clipped
per replica), match the single device's up to float reassociation.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.training import strategy
from keras_attn.training.data import BatchPlan
from keras_attn.training.trainer import read_train_log

STEPS = 12
FLAGS = [
    f"--steps={STEPS}", "--batch-size=16", "--units=16", "--embedding-dim=8", "--vocab-size=400",
    "--dropout=0", "--checkpoint-every=4", "--eval-sentences=0", "--warmup-steps=0",
    "--learning-rate=0.01", "--clipnorm=0.1", "--quiet",
]  # fmt: skip
# Float sums split over replicas differ from one device's in the last bits, and 12 Adam steps
# carry that on: measured (mirrored and two workers alike) 4.8e-7 on losses, 3.4e-7 on variables.
RTOL, ATOL = 1e-5, 1e-5


@pytest.fixture(scope="module", autouse=True)
def _tiny_corpus(tiny_corpus):
    """Every run of this file reads the 200-pair corpus: vocabularies in a fraction of a second."""
    global FLAGS
    FLAGS = [*FLAGS, f"--corpus={tiny_corpus}"]


@pytest.mark.parametrize(
    "tf_config,message",
    [
        (None, "--distribute multiworker needs TF_CONFIG"),
        ("{cluster", "TF_CONFIG is not valid JSON"),
        ('{"cluster": {}, "task": {}}', "TF_CONFIG has no cluster with 'worker'"),
        (
            '{"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}}',
            "TF_CONFIG's task {'type': 'ps', 'index': 0} is not one of its cluster's jobs",
        ),
        (
            '{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 2}}',
            "TF_CONFIG's task index 2 is outside its worker list (2 addresses)",
        ),
    ],
)
def test_multiworker_without_a_usable_tf_config_is_one_line(
    tmp_path, capsys, monkeypatch, tf_config, message
):
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    out = tmp_path / "run"
    assert cli(["train", "--distribute", "multiworker", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_distribute_flag_choices(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli(["train", "--distribute", "tpu", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "invalid choice: 'tpu'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="Expected distribute in"):
        strategy.make_strategy("tpu")
    assert strategy.make_strategy("none") is tf.distribute.get_strategy()


def test_global_batch_must_split_over_the_replicas():
    strategy.check_global_batch(16, 4)
    with pytest.raises(ConfigError, match="batch_size=10 .* over 4 replicas") as caught:
        strategy.check_global_batch(10, 4)
    assert caught.value.fields == ("batch_size",)
    flags = {"batch_size": "--batch-size"}
    assert caught.value.in_terms_of(flags.get).startswith("--batch-size 10 (the global batch)")


def test_the_old_module_name_still_imports_and_warns():
    import importlib
    import sys

    sys.modules.pop("keras_attn.training.distribution", None)
    with pytest.warns(DeprecationWarning, match="keras_attn.training.strategy"):
        old = importlib.import_module("keras_attn.training.distribution")
    assert old.make_strategy is strategy.make_strategy
    assert old.OPTIMIZERS["adam"].__name__ == "ReducedGradientsAdam"


class _Pipelines:
    """Stands in for a strategy: hands the dataset function one worker's InputContext."""

    def __init__(self, pipeline: int, pipelines: int, replicas: int):
        self.context = tf.distribute.InputContext(pipelines, pipeline, replicas)

    def distribute_datasets_from_function(self, dataset_fn):
        return dataset_fn(self.context)


def test_each_replica_gets_its_rows_of_the_global_batch():
    rng = np.random.default_rng(0)
    sources = [rng.integers(4, 50, rng.integers(1, 9), dtype=np.int32) for _ in range(96)]
    targets = [rng.integers(4, 50, rng.integers(3, 9), dtype=np.int32) for _ in range(96)]
    plan = BatchPlan(sources, targets, batch_size=8, seed=3)
    # 4 replicas on 2 workers: worker 1 feeds replicas 2 and 3, element by element in turn.
    per_worker = [
        list(strategy.distributed_batches(_Pipelines(worker, 2, 4), plan, 5, 8))
        for worker in (0, 1)
    ]
    for step in range(5, 8):
        features, labels = plan.batch(step)
        parts = [per_worker[w][2 * (step - 5) + r] for w in (0, 1) for r in (0, 1)]
        for key in ("source_ids", "target_ids"):
            np.testing.assert_array_equal(
                np.concatenate([p[0][key].numpy() for p in parts]), features[key]
            )
        np.testing.assert_array_equal(np.concatenate([p[1].numpy() for p in parts]), labels)
        assert all(p[1].shape[0] == 2 for p in parts)
        assert {float(p[2]) for p in parts} == {float(np.count_nonzero(labels))}

    # Language-model batches (features = the token ids) are cut the same way.
    lm = BatchPlan(None, targets, batch_size=8, seed=3)
    parts = [
        part
        for worker in (0, 1)
        for part in strategy.distributed_batches(_Pipelines(worker, 2, 4), lm, 2, 3)
    ]
    features, labels = lm.batch(2)
    np.testing.assert_array_equal(np.concatenate([p[0].numpy() for p in parts]), features)
    np.testing.assert_array_equal(np.concatenate([p[1].numpy() for p in parts]), labels)

    # On one device (TensorFlow's default strategy) it is the plan's batch as it is.
    (features, labels, tokens), *_ = strategy.distributed_batches(
        tf.distribute.get_strategy(), plan, 5, 6
    )
    np.testing.assert_array_equal(labels, plan.batch(5)[1])
    assert float(tokens) == np.count_nonzero(plan.batch(5)[1])


# Trains with each --distribute name in argv[2:] into argv[1]/NAME, over two logical CPUs.
TWO_CPUS = r"""
import sys
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from keras_attn.cli import main

flags = sys.argv[3:]
for name in sys.argv[2].split(","):
    if main(["train", *flags, "--distribute", name, "--out", f"{sys.argv[1]}/{name}"]):
        sys.exit(1)
"""


def _env(**extra) -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL="3", **extra)


def _run(command: list, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs
    )


def _finish(processes: list[subprocess.Popen], timeout: float = 900) -> None:
    try:
        outputs = [p.communicate(timeout=timeout)[0] for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    for p, output in zip(processes, outputs, strict=True):
        assert p.returncode == 0, output


def _variables(run: Path) -> dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(str(run / "checkpoints"))
    names = [n for n in reader.get_variable_to_shape_map() if "OBJECT_GRAPH" not in n]
    return {n: reader.get_tensor(n) for n in names if "save_counter" not in n}


def assert_same_training(run: Path, reference: Path) -> None:
    log = read_train_log(run / "train_log.tsv")
    expected = read_train_log(reference / "train_log.tsv")
    assert [row[0] for row in log] == list(range(1, STEPS + 1))
    losses = np.array([row[1] for row in expected])
    assert losses[-1] < losses[0] - 0.2  # it learns
    np.testing.assert_allclose(np.array(log), np.array(expected), rtol=RTOL, atol=ATOL)
    ours, theirs = _variables(run), _variables(reference)
    assert sorted(ours) == sorted(theirs)
    assert ours["optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"] == STEPS
    for name, value in theirs.items():
        np.testing.assert_allclose(ours[name], value, rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """`none` and `mirrored` runs of the same config, in one process with two logical CPUs."""
    root = tmp_path_factory.mktemp("distribute")
    command = [sys.executable, "-c", TWO_CPUS, str(root), "none,mirrored", *FLAGS]
    _finish([_run(command, env=_env())])
    return root


@pytest.mark.slow
def test_mirrored_over_two_devices_follows_one_device(runs):
    metrics = json.loads((runs / "mirrored" / "metrics.json").read_text())
    assert metrics["replicas"] == 2
    assert json.loads((runs / "none" / "metrics.json").read_text())["replicas"] == 1
    assert_same_training(runs / "mirrored", runs / "none")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_workers_follow_one_device(runs, tmp_path):
    out = tmp_path / "run"
    cluster = {"worker": [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]}
    processes = []
    for index in (0, 1):
        scratch = tmp_path / f"tmp{index}"
        scratch.mkdir()
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        command = [sys.executable, "-m", "keras_attn.cli", "train", *FLAGS]
        command += ["--distribute", "multiworker", "--out", str(out)]
        processes.append(_run(command, env=_env(TF_CONFIG=tf_config, TMPDIR=str(scratch))))
    _finish(processes)
    assert json.loads((out / "metrics.json").read_text())["replicas"] == 2
    assert_same_training(out, runs / "none")
    assert not any((tmp_path / "tmp1").iterdir())  # the other worker removed its checkpoints


@pytest.mark.slow
def test_when_the_chief_cannot_start_the_other_worker_stops_too(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("not a run")  # the chief refuses to train into it
    cluster = {"worker": [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]}
    processes = []
    for index in (0, 1):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        command = [sys.executable, "-m", "keras_attn.cli", "train", *FLAGS]
        command += ["--distribute", "multiworker", "--out", str(out)]
        processes.append(_run(command, env=_env(TF_CONFIG=tf_config)))
    try:
        outputs = [p.communicate(timeout=600)[0] for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in processes] == [2, 2], outputs
    assert "already holds a run" in outputs[0].splitlines()[-1]
    assert "the chief worker could not start the run" in outputs[1].splitlines()[-1]
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
