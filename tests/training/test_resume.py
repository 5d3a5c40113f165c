"""`keras-attn train` killed with SIGKILL at any moment, then `--resume`d, ends as if never killed.

The killed runs are real processes, forked by a server that has only imported TensorFlow and the
command line (tests/training/fork_server.py: it spares each process the ~5 CPU s import). Each
patches one function so that the process sends itself SIGKILL at a precise point (just before a
file is moved into place, while a checkpoint is complete on disk but not yet recorded, right after
it is recorded), or the test kills it from outside at a random moment mid-step. The reference is an
uninterrupted run in this process; CPU training here is deterministic, so the comparisons are exact
up to 1e-6. Dropout is on, so the dropout seed generators' states must be restored too.
"""

import json
import random
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.training.trainer import RunDirectory, TrainConfig, read_train_log, train
from tests.training.fork_server import ForkedProcess

STEPS, EVERY = 20, 4
TINY_OPTIONS = {"units": 16, "embedding_dim": 8, "dropout": 0.1}
TINY = dict(
    steps=STEPS, batch_size=16, vocab_size=400, checkpoint_every=EVERY, eval_sentences=0,
    warmup_steps=0, schedule="cosine", learning_rate=0.01, options=TINY_OPTIONS,
)  # fmt: skip
FLAGS = [
    f"--{name.replace('_', '-')}={value}"
    for name, value in {**TINY, **TINY_OPTIONS}.items()
    if name != "options"
] + [
    "--quiet",
    "--resume",
]  # every process of a killed run is started the same way


@pytest.fixture(scope="module", autouse=True)
def _tiny_corpus(tiny_corpus):
    """Every run of this file reads the 200-pair corpus: its vocabularies build in a fraction of
    a second, in the test process and in each killed child alike."""
    global TINY, FLAGS
    TINY = dict(TINY, corpus=str(tiny_corpus))
    FLAGS = [*FLAGS, f"--corpus={tiny_corpus}"]


@pytest.fixture(scope="module", autouse=True)
def _fork_server(fork_server):
    global SERVER
    SERVER = fork_server


def launch(run: Path, plan: dict) -> ForkedProcess:
    """`keras-attn train FLAGS... --out RUN`, killing itself as PLAN says (see FORK_SERVER)."""
    return SERVER.launch(plan, ["train", *FLAGS, "--out", run])


def killed(run: Path, plan: dict, timeout: float = 600) -> str:
    """One `keras-attn train` process that must die by SIGKILL; returns its output."""
    process = launch(run, plan)
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == -signal.SIGKILL, f"{plan}: exit {process.returncode}\n{output}"
    return output


def killed_mid_step(run: Path, after_rows: int, delay: float) -> None:
    """Start `keras-attn train`; SIGKILL it `delay` s after its train log has `after_rows` rows."""
    # From 3 rows later, each step waits 0.25 s after its row: the run needs over a second more
    # to end, so the kill (`delay`, at most 0.3 s, after this process sees the row) lands before
    # its end however fast the steps go.
    process = launch(run, {"pause_from_row": after_rows + 3, "pause": 0.25})
    deadline = time.monotonic() + 600
    while len(read_train_log(run / "train_log.tsv")) < after_rows:
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    output, _ = process.communicate()
    assert process.returncode == -signal.SIGKILL, output


def checkpoint_values(run: Path) -> dict[str, np.ndarray]:
    """Every variable of the run's latest checkpoint: model, optimizer (Adam moments and
    iterations) and the step counter."""
    reader = tf.train.load_checkpoint(str(run / "checkpoints"))
    names = [n for n in reader.get_variable_to_shape_map() if "OBJECT_GRAPH" not in n]
    return {name: reader.get_tensor(name) for name in names if "save_counter" not in name}


def assert_same_run(run: Path, reference: Path) -> None:
    ours, theirs = checkpoint_values(run), checkpoint_values(reference)
    assert sorted(ours) == sorted(theirs)
    assert ours["step/.ATTRIBUTES/VARIABLE_VALUE"] == STEPS
    assert ours["optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"] == STEPS
    for name in theirs:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-6, atol=1e-6, err_msg=name)
    for a, b in zip(
        RunDirectory(run).load_model().get_weights(),
        RunDirectory(reference).load_model().get_weights(),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    log = read_train_log(run / "train_log.tsv")
    expected = read_train_log(reference / "train_log.tsv")
    assert [row[0] for row in log] == list(range(1, STEPS + 1)) == [row[0] for row in expected]
    np.testing.assert_allclose(np.array(log), np.array(expected), rtol=1e-6, atol=1e-7)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == STEPS
    assert metrics["final_loss"] == pytest.approx(expected[-1][1], rel=1e-6)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """An uninterrupted run, in this process."""
    run = tmp_path_factory.mktemp("reference") / "run"
    train(run, TrainConfig(**TINY), progress=False, log=lambda line: None)
    losses = [row[1] for row in read_train_log(run / "train_log.tsv")]
    assert losses[-1] < losses[0] - 0.3  # it learns: weights and log are worth comparing
    return run


def test_sigkill_after_a_checkpoint_then_resume_equals_the_uninterrupted_run(tmp_path, reference):
    run = tmp_path / "run"
    run.mkdir()
    # A run killed after its config and vocabularies, before any checkpoint (reused here to skip
    # learning the vocabularies again): the first process resumes it from step 0.
    for name in ("config.json", "source_vocab.txt", "target_vocab.txt"):
        shutil.copy(reference / name, run / name)
    killed(run, {"checkpoint": 2 * EVERY, "recorded": True})
    assert tf.train.latest_checkpoint(str(run / "checkpoints")).endswith(f"ckpt-{2 * EVERY}")
    assert not (run / "model.keras").exists()
    assert len(read_train_log(run / "train_log.tsv")) == 2 * EVERY

    metrics = train(run, TrainConfig(**TINY), resume=True, progress=False, log=lambda line: None)
    assert metrics["steps_this_session"] == STEPS - 2 * EVERY
    assert_same_run(run, reference)
    for name in ("config.json", "source_vocab.txt", "target_vocab.txt", "model.keras"):
        assert (run / name).exists() and not (run / f"{name}.tmp").exists()
    assert any((run / "logs").iterdir())

    # A finished run resumed with more --steps goes on from where it ended.
    longer = dict(TINY, steps=STEPS + 3)
    metrics = train(run, TrainConfig(**longer), resume=True, progress=False, log=lambda x: None)
    assert metrics["steps"] == STEPS + 3 and metrics["steps_this_session"] == 3
    assert RunDirectory(run).read_config().steps == STEPS + 3
    log = read_train_log(run / "train_log.tsv")
    assert [row[0] for row in log] == list(range(1, STEPS + 4))
    assert log[:STEPS] == read_train_log(reference / "train_log.tsv")


@pytest.mark.slow
def test_sigkill_at_every_kind_of_moment_then_resume_equals_the_uninterrupted_run(
    tmp_path, reference
):
    # The last process's run must equal the reference trained in this process. (A fresh
    # process's uninterrupted run equals it too: the killed-once test above resumes in this
    # process what a child process started.)
    run = tmp_path / "run"  # every process below is `keras-attn train ... --resume --out run`
    killed(run, {"before_replace": "config.json"})
    assert sorted(p.name for p in run.iterdir()) == ["config.json.tmp"]
    killed(run, {"before_replace": "target_vocab.txt"})  # while learning the vocabularies
    assert not (run / "target_vocab.txt").exists() and (run / "source_vocab.txt").exists()
    killed(run, {"checkpoint": EVERY, "recorded": False})  # before the first checkpoint counts
    assert tf.train.latest_checkpoint(str(run / "checkpoints")) is None
    killed(run, {"checkpoint": 2 * EVERY, "recorded": False})  # mid-checkpoint
    assert tf.train.latest_checkpoint(str(run / "checkpoints")).endswith(f"ckpt-{EVERY}")
    killed(run, {"checkpoint": 3 * EVERY, "recorded": True})  # right after a checkpoint
    delay = random.Random(0).uniform(0.0, 0.3)
    killed_mid_step(run, after_rows=3 * EVERY + 2, delay=delay)  # at a random moment
    assert not (run / "model.keras").exists()
    killed(run, {"before_replace": "model.keras"})  # all steps done, writing the model
    killed(run, {"before_replace": "metrics.json"})
    assert not (run / "metrics.json").exists()

    process = launch(run, {})
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output
    assert json.loads((run / "metrics.json").read_text())["steps_this_session"] == 0
    assert_same_run(run, reference)
