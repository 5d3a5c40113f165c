"""`keras-attn train --resume` with damaged checkpoints: it resumes from the newest one that
restores, says which it skipped, and ends as a run resumed from that checkpoint normally does."""

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli import main as cli
from keras_attn.training.checkpoints import restore_newest
from keras_attn.training.trainer import RunDirectory, TrainConfig, read_train_log, train
from tests.training.test_resume import checkpoint_values

TINY = dict(
    model="rnn-plain", steps=6, checkpoint_every=2, batch_size=8, vocab_size=100, warmup_steps=0,
    schedule="cosine", eval_sentences=0, options={"units": 8, "embedding_dim": 8, "dropout": 0.1},
)  # fmt: skip
DATA = ".data-00000-of-00001"


def resume(run: Path, steps: int, capsys) -> tuple[int, str, str]:
    """`keras-attn train --resume --steps STEPS --out RUN`: exit status, stdout, stderr."""
    code = cli(["train", "--resume", "--steps", str(steps), "--out", str(run), "--quiet"])
    out, err = capsys.readouterr()
    return code, out, err


def recorded(run: Path) -> list[str]:
    """The checkpoints `run/checkpoints/checkpoint` records, oldest first, by name."""
    state = tf.train.get_checkpoint_state(str(run / "checkpoints"))
    return [Path(path).name for path in state.all_model_checkpoint_paths]


def assert_same_run(run: Path, reference: Path) -> None:
    ours, theirs = checkpoint_values(run), checkpoint_values(reference)
    assert sorted(ours) == sorted(theirs)
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=name)
    for a, b in zip(
        RunDirectory(run).load_model().get_weights(),
        RunDirectory(reference).load_model().get_weights(),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    assert read_train_log(run / "train_log.tsv") == read_train_log(reference / "train_log.tsv")


def resume_to(run: Path, steps: int) -> TrainConfig:
    """The run's saved config with a new step target (what `resume` may change)."""
    return dataclasses.replace(RunDirectory(run).read_config(), steps=steps)


@pytest.fixture(scope="module")
def base(tmp_path_factory, tiny_corpus) -> Path:
    """A finished 6-step run: checkpoints 2, 4 and 6."""
    run = tmp_path_factory.mktemp("base") / "run"
    train(run, TrainConfig(corpus=str(tiny_corpus), **TINY), progress=False, log=lambda x: None)
    assert recorded(run) == ["ckpt-2", "ckpt-4", "ckpt-6"]
    return run


@pytest.fixture(scope="module")
def reference(base, tmp_path_factory) -> Path:
    """`base` as if checkpoint 6 had never been written, resumed normally to step 8."""
    run = tmp_path_factory.mktemp("reference") / "run"
    shutil.copytree(base, run)
    for path in (run / "checkpoints").glob("ckpt-6.*"):
        path.unlink()
    (run / "checkpoints" / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-4"\n'
        'all_model_checkpoint_paths: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-4"\n'
    )
    lines = []
    train(run, resume_to(run, 8), resume=True, progress=False, log=lines.append)
    assert lines[-1].endswith("ckpt-4 at step 4")
    assert [row[0] for row in read_train_log(run / "train_log.tsv")] == list(range(1, 9))
    return run


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def garble_end(path: Path) -> None:
    """Zero the last 64 bytes: the stored checksums no longer match."""
    data = path.read_bytes()
    path.write_bytes(data[:-64] + bytes(64))


DAMAGE = {
    "truncated data": (lambda ck: truncate(ck / f"ckpt-6{DATA}"), "Read less bytes"),
    "garbled data": (lambda ck: garble_end(ck / f"ckpt-6{DATA}"), "Checksum does not match"),
    "missing index": (lambda ck: (ck / "ckpt-6.index").unlink(), "ckpt-6"),
    "garbage index": (lambda ck: (ck / "ckpt-6.index").write_bytes(b"garbage" * 9), "sstable"),
    "recorded but missing": (
        lambda ck: [path.unlink() for path in ck.glob("ckpt-6.*")],
        "ckpt-6",
    ),
}


def saved_values(step: int) -> dict[str, np.ndarray]:
    """What the checkpoint of `step` holds."""
    return {"a": np.full(2000, step, "float32"), "b": np.arange(2000, dtype="float32") * step}


@pytest.fixture
def small_checkpoints(tmp_path) -> Path:
    """Checkpoints 2, 4 and 6 of two variables, recorded by a `tf.train.CheckpointManager`."""
    directory = tmp_path / "checkpoints"
    a, b = tf.Variable(np.zeros(2000, "float32")), tf.Variable(np.zeros(2000, "float32"))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(a=a, b=b), str(directory), 3)
    for step in (2, 4, 6):
        a.assign(saved_values(step)["a"])
        b.assign(saved_values(step)["b"])
        manager.save(checkpoint_number=step)
    return directory


def restore(directory: Path, lines: list) -> tuple[str | None, dict[str, np.ndarray]]:
    """`restore_newest` into fresh variables (garbage first, to see what it overwrites)."""
    a, b = tf.Variable(np.full(2000, -1, "float32")), tf.Variable(np.full(2000, -1, "float32"))
    path = restore_newest(tf.train.Checkpoint(a=a, b=b), directory, lines.append)
    return path, {"a": a.numpy(), "b": b.numpy()}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_restore_newest_skips_a_damaged_latest_checkpoint(small_checkpoints, damage):
    spoil, reason = DAMAGE[damage]
    spoil(small_checkpoints)
    lines = []
    path, values = restore(small_checkpoints, lines)
    assert path == str(small_checkpoints / "ckpt-4")
    for name, value in saved_values(4).items():
        np.testing.assert_array_equal(values[name], value, err_msg=name)
    assert len(lines) == 1 and lines[0].startswith(
        f"skipped checkpoint {small_checkpoints / 'ckpt-6'}: "
    )
    assert reason in lines[0].split(": ", 1)[1] and "\n" not in lines[0]
    # The state file forgets checkpoint 6 and keeps the others' times (for the manager's sweep).
    state = tf.train.get_checkpoint_state(str(small_checkpoints))
    assert recorded(small_checkpoints.parent) == ["ckpt-2", "ckpt-4"]
    assert state.model_checkpoint_path == str(small_checkpoints / "ckpt-4")
    assert len(state.all_model_checkpoint_timestamps) == 2
    assert "/" not in (small_checkpoints / "checkpoint").read_text()  # relative names
    lines.clear()
    assert restore(small_checkpoints, lines)[0] == path and lines == []


def test_restore_newest_goes_back_as_far_as_it_must(small_checkpoints):
    truncate(small_checkpoints / f"ckpt-6{DATA}")
    (small_checkpoints / "ckpt-4.index").unlink()
    lines = []
    path, values = restore(small_checkpoints, lines)
    assert path == str(small_checkpoints / "ckpt-2")
    np.testing.assert_array_equal(values["b"], saved_values(2)["b"])
    assert [line.split(":")[0] for line in lines] == [
        f"skipped checkpoint {small_checkpoints / name}" for name in ("ckpt-6", "ckpt-4")
    ]
    assert recorded(small_checkpoints.parent) == ["ckpt-2"]


def test_restore_newest_without_a_state_file_restores_nothing(tmp_path):
    """A run stopped before its first checkpoint was recorded starts from step 0."""
    lines = []
    path, values = restore(tmp_path / "checkpoints", lines)
    assert path is None and lines == [] and (values["a"] == -1).all()


def test_resume_after_a_damaged_checkpoint_equals_a_normal_resume(
    base, reference, tmp_path, capsys
):
    run = tmp_path / "run"
    shutil.copytree(base, run)
    garble_end(run / "checkpoints" / f"ckpt-6{DATA}")
    code, out, err = resume(run, 4, capsys)  # back at step 4, nothing left to train
    assert (code, err) == (0, "")
    skipped = [line for line in out.splitlines() if line.startswith("skipped checkpoint")]
    assert len(skipped) == 1 and "ckpt-6: " in skipped[0]
    assert f"resumed from {run / 'checkpoints' / 'ckpt-4'} at step 4" in out
    assert recorded(run) == ["ckpt-2", "ckpt-4"]  # the manager's latest is checkpoint 4 again
    # The next run of train does not see the damaged checkpoint, and ends as a normal resume does.
    code, out, err = resume(run, 8, capsys)
    assert (code, err) == (0, "") and "skipped checkpoint" not in out
    assert_same_run(run, reference)
    assert recorded(run) == ["ckpt-4", "ckpt-6", "ckpt-8"]


def test_no_checkpoint_restores_is_a_one_line_error(base, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(base, run)
    for step in (2, 4, 6):
        truncate(run / "checkpoints" / f"ckpt-{step}{DATA}")
    rows = read_train_log(run / "train_log.tsv")
    code, out, err = resume(run, 8, capsys)
    assert code == 2
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(
        "keras-attn train: error: cannot resume: none of the 3 checkpoints recorded in "
    )
    assert "move " in err and "away to start the run over" in err
    assert len([line for line in out.splitlines() if line.startswith("skipped checkpoint")]) == 3
    # Nothing was trained from step 0 over the run.
    assert recorded(run) == ["ckpt-2", "ckpt-4", "ckpt-6"]
    assert read_train_log(run / "train_log.tsv") == rows


@pytest.mark.parametrize("text", ["", "garbage {"])
def test_an_unreadable_state_file_is_a_one_line_error(base, tmp_path, capsys, text):
    run = tmp_path / "run"
    shutil.copytree(base, run)
    (run / "checkpoints" / "checkpoint").write_text(text)
    code, _, err = resume(run, 8, capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert "checkpoint is unreadable" in err
    assert len(read_train_log(run / "train_log.tsv")) == 6
