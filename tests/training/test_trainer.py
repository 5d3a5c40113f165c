import dataclasses
import json
import math
import typing

import numpy as np
import pytest

from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.models.rnn.options import RNNLuongOptions
from keras_attn.training.trainer import RunDirectory, TrainConfig, train

TINY = dict(batch_size=16, vocab_size=400, checkpoint_every=5, eval_sentences=10)
TINY_OPTIONS = {"units": 16, "embedding_dim": 8, "dropout": 0.0}


def test_refuses_to_overwrite_and_to_resume_nothing(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "keep.txt").write_text("mine")
    assert cli(["train", "--steps", "1", "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (tmp_path / "run" / "keep.txt").read_text() == "mine"
    assert cli(["train", "--steps", "1", "--out", str(tmp_path / "run"), "--resume"]) == 2
    assert "cannot resume: " in capsys.readouterr().err  # not a run directory: left alone
    assert (tmp_path / "run" / "keep.txt").read_text() == "mine"


def test_resuming_a_run_killed_before_its_config_starts_it(tmp_path):
    from keras_attn.training.trainer import _resolve_config

    lines = []
    for run in (tmp_path / "never-made", tmp_path / "killed"):
        if run.name == "killed":
            run.mkdir()
            (run / "config.json.tmp").write_text('{"steps": ')  # torn by the kill
        config = _resolve_config(RunDirectory(run), TrainConfig(steps=7), True, lines.append)
        assert config.steps == 7 and "starting the run from step 0" in lines[-1]


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--steps", "0"], "--steps must be positive"),
        (["--model", "nope"], "Unknown --model 'nope'. Expected one of: rnn-plain,"),
        (["--corpus", "nope"], "nope"),
        (["--schedule", "inverse-sqrt", "--warmup-steps", "0"], "--warmup-steps must be >= 1"),
        (["--schedule", "cosine", "--warmup-steps", "-1"], "--warmup-steps must be >= 0"),
        (["--label-smoothing", "1"], "--label-smoothing must be in [0, 1)"),
        (["--schedule", "halving", "--decay-every", "5"], "needs --decay-start and --decay-every"),
        (
            ["--schedule", "halving", "--decay-start", "9", "--decay-every", "0"],
            "--decay-every >= 1, got 9 and 0",
        ),
        (["--decay-start", "100"], "apply to --schedule halving only, not cosine"),
    ],
)
def test_bad_flags_are_one_line_errors(tmp_path, capsys, flags, message):
    assert cli(["train", *flags, "--out", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()  # nothing written, so a corrected retry just works


LOCAL_P = ["--model", "rnn-luong", "--attention", "local-p"]
CLIPNORM = "--clipnorm must be a finite number >= 0"


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--learning-rate", "nan"], "--learning-rate must be a positive finite number, got nan"),
        (["--learning-rate", "inf"], "--learning-rate must be a positive finite number, got inf"),
        (["--learning-rate", "0"], "--learning-rate must be a positive finite number, got 0.0"),
        (["--learning-rate", "1e39"],
         "--learning-rate must be at most 3.403e+38 (the largest float32), got 1e+39"),
        (["--clipnorm", "nan"], f"{CLIPNORM}, got nan"),
        (["--clipnorm", "inf"], f"{CLIPNORM}, got inf"),
        (["--clipnorm", "-1"], f"{CLIPNORM}, got -1.0"),
        (["--clipnorm", "1e39"],
         "--clipnorm must be at most 3.403e+38 (the largest float32), got 1e+39"),
        (["--label-smoothing", "nan"], "--label-smoothing must be in [0, 1), got nan"),
        (["--dropout", "nan"], "--dropout must be in [0, 1), got nan"),
        (["--dropout", "1"], "--dropout must be in [0, 1), got 1.0"),
        (["--dropout", "-0.1"], "--dropout must be in [0, 1), got -0.1"),
        (["--max-minutes", "nan"], "--max-minutes must be a positive finite number, got nan"),
        (["--max-minutes", "inf"], "--max-minutes must be a positive finite number, got inf"),
        (["--max-cpu-minutes=-inf"],
         "--max-cpu-minutes must be a positive finite number, got -inf"),
        ([*LOCAL_P, "--position-gradient-scale", "nan"],
         "--position-gradient-scale must be a positive finite number, got nan"),
        ([*LOCAL_P, "--position-gradient-scale", "inf"],
         "--position-gradient-scale must be a positive finite number, got inf"),
        (["--seed", "-1"], "--seed must be between 0 and 4294967295, got -1"),
        (["--units", "0"], "--units must be positive, got 0"),
        (["--embedding-dim", "-3"], "--embedding-dim must be positive, got -3"),
    ],
)  # fmt: skip
def test_non_finite_and_out_of_range_numbers_are_one_line_errors(tmp_path, capsys, flags, message):
    assert cli(["train", *flags, "--out", str(tmp_path / "r"), "--quiet"]) == 2
    assert capsys.readouterr().err == f"keras-attn train: error: {message}\n"  # one line
    assert not (tmp_path / "r").exists()


def test_every_float_option_refuses_nan_and_infinity():
    """Each float of TrainConfig is checked, so a float option added later cannot slip through."""
    hints = typing.get_type_hints(TrainConfig)
    floats = [name for name, hint in hints.items() if hint in (float, float | None)]
    assert set(floats) >= {"learning_rate", "clipnorm", "label_smoothing", "max_minutes",
                           "max_cpu_minutes"}  # fmt: skip
    for name in floats:
        for value in (math.nan, math.inf, -math.inf):
            config = TrainConfig(model="rnn-luong", **{name: value})
            with pytest.raises(ConfigError, match=f"^{name} must ") as caught:
                config.validate()
            assert name in caught.value.fields


def test_every_float_option_of_a_family_refuses_nan_and_infinity():
    options = typing.get_type_hints(RNNLuongOptions)
    floats = [name for name, hint in options.items() if hint is float]
    assert set(floats) == {"dropout", "position_gradient_scale"}
    for name in floats:
        for value in (math.nan, math.inf, -math.inf):
            config = TrainConfig(model="rnn-luong", options={"attention": "local-p", name: value})
            with pytest.raises(ConfigError, match=f"^{name} must ") as caught:
                config.validate()
            assert name in caught.value.fields


def test_out_that_is_not_a_directory_is_a_one_line_error(tmp_path, capsys):
    mine = tmp_path / "file"
    mine.write_text("mine")
    for out, message in [
        (mine, f"--out {mine} is not a directory"),
        (mine / "run", f"--out {mine / 'run'} is not a directory ({mine} is a file)"),
    ]:
        for resume in ([], ["--resume"]):
            assert cli(["train", "--steps", "1", "--out", str(out), "--quiet", *resume]) == 2
            assert capsys.readouterr().err == f"keras-attn train: error: {message}\n"
    assert mine.read_text() == "mine"


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_runs_export_and_translate(tmp_path, tiny_corpus, policy):
    from keras_attn.export.cli import export_run

    run = tmp_path / "run"
    config = TrainConfig(
        steps=3, mixed_precision=policy, corpus=str(tiny_corpus), options=TINY_OPTIONS, **TINY
    )
    metrics = train(run, config, progress=False)
    assert metrics["precision"] == policy and np.isfinite(metrics["final_loss"])
    assert all(0 <= metrics[f"dev_{name}"] <= 100 for name in ("rouge1", "rouge2", "rougeL"))
    model = RunDirectory(run).load_model()
    assert model.get_layer("decoder").compute_dtype == policy.split("_")[1]
    assert all(w.dtype == "float32" for w in model.trainable_weights)
    version = export_run(run, tmp_path / "models", check=False)
    assert (version / "saved_model.pb").exists()


def test_clipnorm_flag_clips_the_global_gradient_norm(tmp_path, monkeypatch):
    """Pascanu et al. (2013): if ||g|| >= c, g <- c / ||g|| * g, over all variables together."""
    import keras

    from keras_attn.training import trainer

    captured = {}
    monkeypatch.setattr(trainer, "train", lambda out, config, **kwargs: captured.update(c=config))
    flags = ["--clipnorm", "0.5", "--learning-rate", "1", "--warmup-steps", "0", "--schedule",
             "cosine"]  # fmt: skip
    assert cli(["train", *flags, "--out", str(tmp_path)]) == 0
    config = captured["c"]
    assert config.clipnorm == 0.5

    small = [np.array([0.05, -0.02], "float32"), np.array([0.01, 0.02, 0.03], "float32")]
    big = [np.array([30.0, -40.0], "float32"), np.array([0.0, 5.0, 0.0], "float32")]
    norm = np.sqrt(sum(float(np.sum(g**2)) for g in big))
    globally = [g * (0.5 / norm) for g in big]
    per_variable = [g * min(1.0, 0.5 / np.linalg.norm(g)) for g in big]

    def run(optimizer, gradients, scale=1.0):
        variables = [keras.Variable(np.ones(2)), keras.Variable(np.ones(3))]
        for grads in gradients:
            optimizer.apply([g * scale for g in grads], variables)
        return np.concatenate([v.numpy() for v in variables])

    def adam():
        return keras.optimizers.Adam(trainer.learning_rate_schedule(config))

    clipped = run(trainer.build_optimizer(config, "float32"), [small, big])
    np.testing.assert_allclose(clipped, run(adam(), [small, globally]), rtol=1e-6, atol=1e-7)
    assert np.abs(clipped - run(adam(), [small, big])).max() > 0.05  # clipping changed the step
    assert np.abs(clipped - run(adam(), [small, per_variable])).max() > 0.05  # not per variable

    scaled = trainer.build_optimizer(config, "mixed_float16")
    assert scaled.inner_optimizer.global_clipnorm == 0.5
    loss_scale = float(scaled.initial_scale)  # the scale of the first steps
    # The trainer's gradients come from the scaled loss; they are unscaled before clipping.
    np.testing.assert_allclose(run(scaled, [small, big], loss_scale), clipped, rtol=1e-6)
    unclipped = trainer.build_optimizer(dataclasses.replace(config, clipnorm=0.0), "float32")
    assert unclipped.global_clipnorm is None and unclipped.clipnorm is None


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_weight_decay_shrinks_weights_but_not_biases_and_norms(tmp_path, monkeypatch, optimizer):
    """Loshchilov & Hutter (2019): w <- w - lr · lambda · w besides the gradient's step; with a
    zero gradient (Adam's and SGD's steps are then zero) only the decay moves the weights."""
    import keras

    from keras_attn.training import trainer

    captured = {}
    monkeypatch.setattr(trainer, "train", lambda out, config, **kwargs: captured.update(c=config))
    flags = ["--weight-decay", "0.1", "--optimizer", optimizer, "--learning-rate", "0.5",
             "--warmup-steps", "0"]  # fmt: skip
    assert cli(["train", *flags, "--out", str(tmp_path)]) == 0
    config = captured["c"]
    assert config.weight_decay == 0.1
    names = ("kernel", "bias", "gamma", "beta", "embeddings")
    variables = [keras.Variable(np.full(3, 2.0), name=name) for name in names]
    built = trainer.build_optimizer(config, "float32")
    built.apply([np.zeros(3, "float32")] * len(names), variables)
    rate = float(trainer.learning_rate_schedule(config)(0))
    decayed = 2.0 * (1 - rate * 0.1)
    expected = {"kernel": decayed, "bias": 2.0, "gamma": 2.0, "beta": 2.0, "embeddings": decayed}
    for name, variable in zip(names, variables, strict=True):
        np.testing.assert_allclose(variable.numpy(), expected[name], rtol=1e-6, err_msg=name)
    plain = trainer.build_optimizer(dataclasses.replace(config, weight_decay=0.0), "float32")
    assert plain.weight_decay is None


def test_sgd_flag_takes_plain_clipped_gradient_steps(tmp_path, monkeypatch):
    """--optimizer sgd: w <- w - lr(s) · g, g clipped to the global norm; no per-weight scaling."""
    import keras

    from keras_attn.training import trainer

    captured = {}
    monkeypatch.setattr(trainer, "train", lambda out, config, **kwargs: captured.update(c=config))
    flags = ["--optimizer", "sgd", "--learning-rate", "2", "--clipnorm", "1", "--warmup-steps",
             "0", "--schedule", "halving", "--decay-start", "1", "--decay-every", "1"]  # fmt: skip
    assert cli(["train", *flags, "--out", str(tmp_path)]) == 0
    config = captured["c"]
    assert (config.optimizer, config.decay_start, config.decay_every) == ("sgd", 1, 1)

    optimizer = trainer.build_optimizer(config, "float32")
    assert isinstance(optimizer, keras.optimizers.SGD) and optimizer.momentum == 0.0
    small = np.array([0.3, -0.4], "float32")  # norm 0.5: not clipped
    big = np.array([6.0, 8.0], "float32")  # norm 10: clipped to [0.6, 0.8]
    variable = keras.Variable(np.ones(2, "float32"))
    optimizer.apply([small], [variable])  # lr 2
    np.testing.assert_allclose(variable.numpy(), 1 - 2 * small, rtol=1e-6)
    optimizer.apply([big], [variable])  # lr 1 after the first halving
    np.testing.assert_allclose(variable.numpy(), 1 - 2 * small - [0.6, 0.8], rtol=1e-6)
    # a tenth of the gradient moves the weights a tenth as far (Adam would move them as far)
    tenth = keras.Variable(np.ones(2, "float32"))
    trainer.build_optimizer(config, "float32").apply([small / 10], [tenth])
    np.testing.assert_allclose(1 - tenth.numpy(), 2 * small / 10, rtol=1e-5)
    assert isinstance(trainer.build_optimizer(config, "mixed_float16").inner_optimizer,
                      keras.optimizers.SGD)  # fmt: skip


def test_an_sgd_halving_run_resumes_where_it_stopped(tmp_path, tiny_corpus):
    """The halving schedule reads the restored update counter: 2 + 2 steps equal 4 in one go."""
    import keras

    sgd = dict(TINY, options=TINY_OPTIONS, optimizer="sgd", learning_rate=0.5, clipnorm=1.0,
               warmup_steps=0, schedule="halving", decay_start=1, decay_every=1, eval_sentences=0,
               corpus=str(tiny_corpus))  # fmt: skip
    train(tmp_path / "split", TrainConfig(steps=2, **sgd), progress=False)
    metrics = train(tmp_path / "split", TrainConfig(steps=4, **sgd), resume=True, progress=False)
    assert (metrics["steps"], metrics["steps_this_session"]) == (4, 2)
    train(tmp_path / "whole", TrainConfig(steps=4, **sgd), progress=False)
    split, whole = (keras.saving.load_model(tmp_path / name / "model.keras", compile=False)
                    for name in ("split", "whole"))  # fmt: skip
    for a, b in zip(split.get_weights(), whole.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_bad_optimizer_is_a_config_error():
    with pytest.raises(ConfigError, match="optimizer must be one of adam, sgd, got 'rmsprop'"):
        TrainConfig(optimizer="rmsprop").validate()


def test_luong_options_are_checked_and_saved(tmp_path, capsys):
    flags = ["--out", str(tmp_path / "r"), "--quiet", "--steps", "1"]
    assert cli(["train", "--attention", "local-p", *flags]) == 2
    assert "--attention does not apply to --model rnn-attention" in capsys.readouterr().err
    assert cli(["train", "--model", "rnn-luong", "--window", "0", *flags]) == 2
    assert "--window must be positive" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    config = TrainConfig(
        model="rnn-luong",
        options={"attention": "local-m", "window": 3, "input_feeding": False},
    )
    assert config.model_hyperparameters() == {
        "embedding_dim": 128, "units": 256, "cell": "lstm", "gru_reset_after": True,
        "dropout": 0.1, "num_layers": 1, "encoder_direction": "bi", "reverse_source": False,
        "score": "general", "distribution": "softmax",
        "attention": "local-m", "window": 3, "input_feeding": False,
        "position_gradient_scale": 1.0,
    }  # fmt: skip
    assert TrainConfig().model_hyperparameters()["score"] == "additive"


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--model", "rnn-luong"], "applies to --attention local-p only, got --attention global"),
        (["--model", "rnn-luong", "--attention", "local-m"], "got --attention local-m"),
        (["--model", "rnn-luong", "--attention", "local-p", "--position-gradient-scale", "0"],
         "--position-gradient-scale must be a positive finite number, got 0.0"),
        ([], "--position-gradient-scale does not apply to --model rnn-attention"),
    ],
)  # fmt: skip
def test_position_gradient_scale_is_checked(tmp_path, capsys, flags, message):
    flags = [*flags, "--out", str(tmp_path / "r"), "--quiet", "--steps", "1"]
    if "--position-gradient-scale" not in flags:
        flags += ["--position-gradient-scale", "0.25"]
    assert cli(["train", *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_position_gradient_scale_reaches_the_saved_local_p_layer(tmp_path, tiny_corpus):
    config = TrainConfig(
        model="rnn-luong", steps=2, optimizer="sgd", learning_rate=1.0, schedule="halving",
        decay_start=1, decay_every=1, corpus=str(tiny_corpus), **TINY,
        options={**TINY_OPTIONS, "attention": "local-p", "position_gradient_scale": 0.25},
    )  # fmt: skip
    assert config.model_hyperparameters()["position_gradient_scale"] == 0.25
    train(tmp_path / "run", config, progress=False)
    run = RunDirectory(tmp_path / "run")
    assert run.read_config().options["position_gradient_scale"] == 0.25
    align = run.load_model().get_layer("decoder").attention_layer
    assert align.mode == "predictive" and align.position_gradient_scale == 0.25


def test_schedule_and_label_smoothing_flags_reach_the_train_step(
    tmp_path, tiny_corpus, monkeypatch
):
    from keras_attn.training import trainer
    from keras_attn.training.schedules import InverseSqrtSchedule
    from keras_attn.training.tasks import translation

    losses, optimizers = [], []
    original_loss, original_build = translation.masked_cross_entropy, trainer.build_optimizer

    def recording_loss(labels, logits, **kwargs):
        losses.append(kwargs)
        return original_loss(labels, logits, **kwargs)

    def recording_build(config, policy):
        optimizers.append(original_build(config, policy))
        return optimizers[-1]

    monkeypatch.setattr(translation, "masked_cross_entropy", recording_loss)
    monkeypatch.setattr(trainer, "build_optimizer", recording_build)
    flags = ["--schedule", "inverse-sqrt", "--warmup-steps", "3", "--label-smoothing", "0.1"]
    tiny = ["--batch-size", "16", "--units", "16", "--embedding-dim", "8", "--vocab-size", "400",
            "--corpus", str(tiny_corpus)]  # fmt: skip
    run = tmp_path / "run"
    assert cli(["train", *flags, *tiny, "--steps", "2", "--eval-sentences", "5", "--quiet",
                "--out", str(run)]) == 0  # fmt: skip
    assert losses and all(kwargs == {"label_smoothing": 0.1} for kwargs in losses)
    schedule = optimizers[0]._learning_rate
    assert isinstance(schedule, InverseSqrtSchedule) and schedule.warmup_steps == 3
    assert float(optimizers[0].learning_rate) == pytest.approx(float(schedule(2)))  # 2 updates
    saved = RunDirectory(run).read_config()
    assert (saved.schedule, saved.label_smoothing) == ("inverse-sqrt", 0.1)


def test_max_minutes_stops_the_loop_and_a_resume_finishes_the_run(tmp_path, tiny_corpus, capsys):
    run = tmp_path / "run"
    assert cli([
        "train", "--model", "rnn-plain", "--steps", "40", "--max-minutes", "0.0001",
        "--batch-size", "16", "--units", "16", "--embedding-dim", "8", "--vocab-size", "400",
        "--eval-sentences", "0", "--corpus", str(tiny_corpus), "--out", str(run), "--quiet",
    ]) == 0  # fmt: skip
    assert "stopped at step 1 of 40: --max-minutes 0.0001 spent" in capsys.readouterr().out
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 1 and metrics["stopped_by_max_minutes"] is True
    assert metrics["dev_sentences"] == 0 and "dev_bleu" not in metrics
    assert (run / "checkpoints" / "ckpt-1.index").exists() and (run / "model.keras").exists()
    assert RunDirectory(run).read_config().max_minutes == 0.0001

    # The saved config is kept (rnn-plain, no dev evaluation) but for the step target given;
    # the time limit was this call's.
    assert cli(["train", "--resume", "--steps", "3", "--out", str(run), "--quiet"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert (metrics["steps"], metrics["steps_this_session"]) == (3, 2)
    assert metrics["stopped_by_max_minutes"] is False and "dev_bleu" not in metrics
    config = RunDirectory(run).read_config()
    assert (config.model, config.max_minutes, config.steps) == ("rnn-plain", None, 3)


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--max-minutes", "0"], "--max-minutes must be a positive finite number, got 0.0"),
        (["--eval-sentences", "-1"], "--eval-sentences must be >= 0"),
        (["--eval-every", "-1"], "--eval-every must be >= 0"),
        (
            ["--eval-every", "5", "--eval-sentences", "0"],
            "--eval-every 5 needs dev sentences to evaluate, got --eval-sentences 0",
        ),
        (
            ["--max-cpu-minutes", "-1"],
            "--max-cpu-minutes must be a positive finite number, got -1.0",
        ),
        (["--context-feeding"], "--context-feeding does not apply to --model rnn-attention"),
    ],
)
def test_bad_budget_flags_are_one_line_errors(tmp_path, capsys, flags, message):
    assert cli(["train", *flags, "--out", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_max_cpu_minutes_counts_this_process_cpu_time(tmp_path, tiny_corpus, capsys):
    run = tmp_path / "run"
    assert cli([
        "train", "--steps", "40", "--max-cpu-minutes", "0.0001", "--batch-size", "16",
        "--units", "16", "--embedding-dim", "8", "--vocab-size", "400", "--eval-sentences", "0",
        "--corpus", str(tiny_corpus), "--out", str(run), "--quiet",
    ]) == 0  # fmt: skip
    assert "stopped at step 1 of 40: --max-cpu-minutes 0.0001 spent" in capsys.readouterr().out
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 1 and metrics["stopped_by_max_minutes"] is True
    assert 0.006 <= metrics["train_cpu_seconds_this_session"]
