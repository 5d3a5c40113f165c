import json

import numpy as np
import pytest

from keras_attn.cli import main as cli
from keras_attn.training.data import BatchPlan
from keras_attn.training.trainer import RunDirectory, TrainConfig, train

TINY = dict(
    batch_size=16, units=16, embedding_dim=8, vocab_size=400, dropout=0.0,
    checkpoint_every=5, eval_sentences=10,
)  # fmt: skip


def weights_of(run):
    return [w.copy() for w in RunDirectory(run).load_model().get_weights()]


class Crash(Exception):
    pass


def test_resume_after_a_crash_continues_exactly_where_it_stopped(tmp_path, monkeypatch):
    straight = tmp_path / "straight"
    train(straight, TrainConfig(steps=10, **TINY), progress=False)

    crashed = tmp_path / "crashed"
    original = BatchPlan.iterate

    def crash_at_step_7(self, start, stop):
        for step, batch in zip(range(start, stop), original(self, start, stop), strict=True):
            if step == 7:
                raise Crash("killed")
            yield batch

    monkeypatch.setattr(BatchPlan, "iterate", crash_at_step_7)
    with pytest.raises(Exception, match="killed"):
        train(crashed, TrainConfig(steps=10, **TINY), progress=False)
    monkeypatch.setattr(BatchPlan, "iterate", original)
    assert not (crashed / "model.keras").exists()  # died before the end; checkpoint 5 is there

    metrics = train(crashed, TrainConfig(steps=10, **TINY), resume=True, progress=False)
    assert metrics["steps"] == 10 and metrics["steps_this_session"] == 5
    for a, b in zip(weights_of(straight), weights_of(crashed), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    saved = json.loads((crashed / "metrics.json").read_text())
    assert saved["steps"] == 10 and 0.0 <= saved["dev_exact_match"] <= 1.0
    for name in ("config.json", "source_vocab.txt", "target_vocab.txt", "model.keras"):
        assert (crashed / name).exists()
    assert any((crashed / "logs").iterdir())
    assert (crashed / "checkpoints" / "checkpoint").exists()


def test_resume_can_extend_a_finished_run(tmp_path):
    run = tmp_path / "run"
    train(run, TrainConfig(steps=5, **TINY), progress=False)
    metrics = train(run, TrainConfig(steps=8, **TINY), resume=True, progress=False)
    assert metrics["steps"] == 8 and metrics["steps_this_session"] == 3
    assert RunDirectory(run).read_config().steps == 8


def test_refuses_to_overwrite_and_to_resume_nothing(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "keep.txt").write_text("mine")
    assert cli(["train", "--steps", "1", "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (tmp_path / "run" / "keep.txt").read_text() == "mine"
    assert cli(["train", "--steps", "1", "--out", str(tmp_path / "none"), "--resume"]) == 2
    assert "cannot resume" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--steps", "0"], "--steps must be positive"),
        (["--model", "nope"], "Unknown model 'nope'"),
        (["--corpus", "nope"], "nope"),
    ],
)
def test_bad_flags_are_one_line_errors(tmp_path, capsys, flags, message):
    assert cli(["train", *flags, "--out", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()  # nothing written, so a corrected retry just works


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_runs_export_and_translate(tmp_path, policy):
    from keras_attn.export.cli import export_run

    run = tmp_path / "run"
    metrics = train(run, TrainConfig(steps=3, mixed_precision=policy, **TINY), progress=False)
    assert metrics["precision"] == policy and np.isfinite(metrics["final_loss"])
    model = RunDirectory(run).load_model()
    assert model.get_layer("decoder").compute_dtype == policy.split("_")[1]
    assert all(w.dtype == "float32" for w in model.trainable_weights)
    version = export_run(run, tmp_path / "models", check=False)
    assert (version / "saved_model.pb").exists()


def test_auto_precision_follows_the_device():
    import tensorflow as tf

    from keras_attn.training.precision import resolve_policy

    on_gpu = bool(tf.config.list_physical_devices("GPU"))
    assert resolve_policy("auto") == ("mixed_float16" if on_gpu else "float32")
    with pytest.raises(ValueError, match="Received: 'fp8'"):
        resolve_policy("fp8")
