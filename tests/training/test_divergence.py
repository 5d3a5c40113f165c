"""A run whose loss or weights stop being finite stops at once (one line, exit 1) and saves
nothing from that state; a step that mixed_float16's loss scaler skips does not stop it."""

import math
import re

import tensorflow as tf

from keras_attn.cli import main as cli
from keras_attn.training import trainer
from keras_attn.training.tasks import translation
from keras_attn.training.trainer import read_train_log


def flags(corpus, run, **overrides) -> list[str]:
    values = dict(
        model="rnn-plain", corpus=corpus, steps=6, checkpoint_every=2, batch_size=8, units=8,
        embedding_dim=8, vocab_size=100, warmup_steps=0,
        schedule="cosine", eval_sentences=0, out=run,
    ) | overrides  # fmt: skip
    return [f"--{name.replace('_', '-')}={value}" for name, value in values.items()] + ["--quiet"]


def recorded(run) -> list[str]:
    state = tf.train.get_checkpoint_state(str(run / "checkpoints"))
    return [] if state is None else [p.rsplit("/", 1)[1] for p in state.all_model_checkpoint_paths]


def diverged(capsys) -> tuple[int, str]:
    """The step named by the one-line error on stderr, and that line."""
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    match = re.match(r"keras-attn train: error: training diverged at step (\d+): ", err)
    assert match, err
    return int(match.group(1)), err.strip()


def poison_steps(monkeypatch, steps: set[int], factor: float) -> None:
    """Multiply the loss of the given steps (1 = the first) by `factor`: with an infinite factor
    the loss and the gradients are not finite."""
    real = translation.masked_cross_entropy
    calls = tf.Variable(0)  # the train step's calls of the loss, one per step on one replica

    def loss(labels, logits, **kwargs):
        calls.assign_add(1)
        poisoned = tf.reduce_any(tf.equal(calls, list(steps)))
        return real(labels, logits, **kwargs) * tf.where(poisoned, factor, 1.0)

    monkeypatch.setattr(translation, "masked_cross_entropy", loss)


def test_an_enormous_learning_rate_stops_at_the_first_non_finite_loss(
    tiny_corpus, tmp_path, capsys
):
    run = tmp_path / "run"
    args = flags(tiny_corpus, run, learning_rate=1e30, clipnorm=0, checkpoint_every=1)
    assert cli(["train", *args]) == 1
    step, err = diverged(capsys)
    assert re.search(r"the loss is (nan|inf)", err) and step >= 2
    assert f"nothing was saved after {run / 'checkpoints' / f'ckpt-{step - 1}'}" in err
    # Checkpoints, log rows: the steps before the diverged one, all finite; no model, no metrics.
    assert recorded(run)[-1] == f"ckpt-{step - 1}"
    assert not list((run / "checkpoints").glob(f"ckpt-{step}.*"))
    rows = read_train_log(run / "train_log.tsv")
    assert [row[0] for row in rows] == list(range(1, step))
    assert all(math.isfinite(row[1]) for row in rows)
    assert not (run / "model.keras").exists() and not (run / "metrics.json").exists()


def test_weights_made_non_finite_by_a_step_are_not_checkpointed(
    tiny_corpus, tmp_path, capsys, monkeypatch
):
    """The 4th update (a checkpoint step) makes a weight NaN; its loss was computed before it."""
    real_build = trainer.build_optimizer

    def build(config, policy):
        optimizer = real_build(config, policy)
        real_apply = optimizer.apply

        def apply(gradients, variables):
            poison = tf.where(tf.equal(optimizer.iterations, 3), math.nan, 0.0)
            return real_apply([*gradients[:-1], gradients[-1] + poison], variables)

        optimizer.apply = apply
        return optimizer

    monkeypatch.setattr(trainer, "build_optimizer", build)
    run = tmp_path / "run"
    assert cli(["train", *flags(tiny_corpus, run)]) == 1
    step, err = diverged(capsys)
    assert step == 4 and "the weights of " in err and " are not finite" in err
    assert recorded(run) == ["ckpt-2"] and not list((run / "checkpoints").glob("ckpt-4.*"))
    rows = read_train_log(run / "train_log.tsv")
    assert [row[0] for row in rows] == [1, 2, 3, 4] and all(math.isfinite(r[1]) for r in rows)
    assert not (run / "model.keras").exists() and not (run / "metrics.json").exists()


def test_mixed_float16_skips_a_passing_overflow_and_stops_on_one_that_lasts(
    tiny_corpus, tmp_path, capsys, monkeypatch
):
    """Under mixed_float16 the loss scaler skips a step with non-finite gradients (the weights
    stay as they were): one such step is no divergence, MAX_SKIPPED_STEPS in a row are."""
    monkeypatch.setattr(trainer, "MAX_SKIPPED_STEPS", 3)
    poison_steps(monkeypatch, {2, 4, 5, 6}, math.inf)
    run = tmp_path / "run"
    assert cli(["train", *flags(tiny_corpus, run, steps=8, mixed_precision="mixed_float16")]) == 1
    step, err = diverged(capsys)
    assert step == 6 and "the loss was not finite in 3 steps in a row" in err
    rows = read_train_log(run / "train_log.tsv")
    assert [row[0] for row in rows] == [1, 2, 3, 4, 5]
    assert [math.isfinite(row[1]) for row in rows] == [True, False, True, False, False]
    # Checkpoint 4 holds the weights of the two steps that were applied (1 and 3); the scaler
    # halved its scale at each skipped one (2 and 4).
    assert recorded(run) == ["ckpt-2", "ckpt-4"]
    reader = tf.train.load_checkpoint(str(run / "checkpoints"))
    assert reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == 4
    assert (
        reader.get_tensor("optimizer/inner_optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == 2
    )
    assert reader.get_tensor("optimizer/dynamic_scale/.ATTRIBUTES/VARIABLE_VALUE") == 2.0**15 / 4
    assert not (run / "model.keras").exists()


def test_mixed_bfloat16_has_no_loss_scaler_and_stops_at_the_first_non_finite_loss(
    tiny_corpus, tmp_path, capsys, monkeypatch
):
    poison_steps(monkeypatch, {3}, math.inf)
    run = tmp_path / "run"
    assert cli(["train", *flags(tiny_corpus, run, mixed_precision="mixed_bfloat16")]) == 1
    step, err = diverged(capsys)
    assert step == 3 and "the loss is inf" in err
    assert recorded(run) == ["ckpt-2"] and len(read_train_log(run / "train_log.tsv")) == 2
