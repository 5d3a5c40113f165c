"""Scheduled sampling (Bengio et al., 2015, arXiv:1506.03099) in `keras-attn train`.

The schedules against the paper's formulas; epsilon = 1 is teacher forcing (logits, loss and
gradients); epsilon = 0 feeds the model's own samples, drawn from its previous-step
distribution and reproducible from (seed, step); the share of gold inputs follows epsilon; the
flags and their errors; a run killed with SIGKILL and resumed equals the uninterrupted run; the
exported model of such a run is the teacher-forced run's architecture.
"""

import dataclasses
import math
import re
import signal

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli import build_parser
from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.models.families import get_family
from keras_attn.training.config import TrainConfig
from keras_attn.training.metrics import masked_cross_entropy
from keras_attn.training.scheduled_sampling import (
    DEFAULT_CONSTANTS,
    ScheduledSampling,
    sampling_epsilon,
)
from keras_attn.training.tasks import get_task
from keras_attn.training.trainer import RunDirectory, read_train_log, train
from tests.training.fork_server import ForkedProcess
from tests.training.test_resume import checkpoint_values

SOURCE = np.array([[5, 6, 7, 8, 0], [9, 4, 0, 0, 0], [3, 3, 5, 0, 0]], "int32")
TARGET = np.array([[2, 11, 12, 13, 14], [2, 14, 15, 0, 0], [2, 16, 0, 0, 0]], "int32")
FEATURES = {"source_ids": SOURCE, "target_ids": TARGET}
LABELS = np.array([[11, 12, 13, 14, 3], [14, 15, 3, 0, 0], [16, 3, 0, 0, 0]], "int32")

FAMILIES = [
    ("rnn-attention", {}),
    ("rnn-attention", {"cell": "gru", "num_layers": 2}),
    ("rnn-luong", {"score": "dot"}),
    ("rnn-luong", {"cell": "gru", "attention": "local-m", "window": 1, "num_layers": 3}),
    ("rnn-luong", {"input_feeding": False}),
    ("rnn-plain", {}),
    ("rnn-plain", {"cell": "gru", "reset_after": False, "num_layers": 2}),
]
IDS = ["bahdanau", "bahdanau-gru-2", "luong-dot", "luong-gru-local-m-3", "luong-fast", "plain",
       "plain-cho-gru-2"]  # fmt: skip


def tiny(family="rnn-luong", dropout=0.0, target_vocab=30, **options):
    keras.utils.set_random_seed(0)
    model = get_family(family).build(20, target_vocab, embedding_dim=6, units=8, dropout=dropout,
                                     **options)  # fmt: skip
    return model, get_family(family)


# The schedules, section 2.4 of the paper.


def test_schedules_follow_the_papers_formulas():
    steps = np.array([0, 1, 10, 100, 1_000, 5_000, 20_000, 10**6])
    for c, floor in ((1e-4, None), (2e-3, 0.1), (1.0, 0.25)):
        got = [float(sampling_epsilon("linear", i, c, floor)) for i in steps]
        np.testing.assert_allclose(got, np.maximum(floor or 0.0, 1.0 - c * steps), atol=1e-12)
    for k in (0.9998, 0.99, 0.5):
        got = [float(sampling_epsilon("exponential", i, k)) for i in steps]
        np.testing.assert_allclose(got, k ** steps.astype(float), rtol=1e-9, atol=1e-300)
    for k in (1.0, 10.0, 500.0):
        with np.errstate(over="ignore"):
            expected = k / (k + np.exp(steps / k))
        got = [float(sampling_epsilon("inverse-sigmoid", i, k)) for i in steps]
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-300)
    # No constant: the defaults, which reach one half where the help says.
    for schedule, half in (("linear", 5_000), ("exponential", 3_466), ("inverse-sigmoid", 3_107)):
        assert float(sampling_epsilon(schedule, 0)) == pytest.approx(
            {"linear": 1.0, "exponential": 1.0, "inverse-sigmoid": 500 / 501}[schedule]
        )
        assert float(sampling_epsilon(schedule, half)) == pytest.approx(0.5, abs=1e-3)
        k = DEFAULT_CONSTANTS[schedule]
        formula = {
            "linear": 0.5 / k,
            "exponential": -math.log(2) / math.log(k),
            "inverse-sigmoid": k * math.log(k),
        }
        assert half == pytest.approx(formula[schedule], abs=1)
    # A tensor step (the trainer's counter) gives the same value.
    assert float(sampling_epsilon("exponential", tf.constant(7, tf.int64), 0.9)) == pytest.approx(
        0.9**7
    )


# The training pass.


@pytest.mark.parametrize("family,options", FAMILIES, ids=IDS)
def test_epsilon_one_is_teacher_forcing_logits_loss_and_gradients(family, options):
    model, spec = tiny(family, **options)
    sampling = ScheduledSampling(model, spec, "linear", 1e-3)  # epsilon_0 = 1
    assert float(sampling.epsilon(0)) == 1.0
    with tf.GradientTape(persistent=True) as tape:
        forced = model(FEATURES, training=True)
        logits, inputs = sampling.decode(FEATURES, 0)
        forced_loss = masked_cross_entropy(LABELS, forced)
        loss = masked_cross_entropy(LABELS, logits)
    np.testing.assert_array_equal(inputs.numpy(), TARGET)
    real = LABELS != 0
    np.testing.assert_allclose(logits.numpy()[real], forced.numpy()[real], rtol=1e-5, atol=1e-6)
    assert float(loss) == pytest.approx(float(forced_loss), rel=1e-6)
    variables = model.trainable_variables
    for ours, theirs, variable in zip(
        tape.gradient(loss, variables), tape.gradient(forced_loss, variables), variables,
        strict=True,
    ):  # fmt: skip
        if theirs is None:
            assert ours is None or not np.any(tf.convert_to_tensor(ours).numpy()), variable.path
            continue
        np.testing.assert_allclose(
            tf.convert_to_tensor(ours).numpy(), tf.convert_to_tensor(theirs).numpy(),
            rtol=1e-4, atol=1e-6, err_msg=variable.path,
        )  # fmt: skip


def test_the_loop_runs_in_training_mode_with_the_models_dropout():
    model, spec = tiny("rnn-attention", dropout=0.5)
    sampling = ScheduledSampling(model, spec, "linear", 1e-3)
    inference = model(FEATURES, training=False).numpy()
    first, inputs_1 = sampling.decode(FEATURES, 0)
    second, inputs_2 = sampling.decode(FEATURES, 0)
    real = LABELS != 0
    # Same step: the same inputs (gold here), new dropout masks.
    np.testing.assert_array_equal(inputs_1.numpy(), inputs_2.numpy())
    assert np.abs(first.numpy() - second.numpy())[real].max() > 1e-3
    assert np.abs(first.numpy() - inference)[real].max() > 1e-3


def test_epsilon_zero_feeds_the_models_own_samples_reproducibly():
    model, spec = tiny("rnn-luong")
    sampling = ScheduledSampling(model, spec, "linear", 1.0, seed=3)  # epsilon_i = 0 for i >= 1
    assert float(sampling.epsilon(1)) == 0.0
    logits, inputs = sampling.decode(FEATURES, 1)
    inputs = inputs.numpy()
    assert (inputs[:, 0] == 2).all()  # START
    np.testing.assert_array_equal(inputs[TARGET == 0], 0)  # padding reads padding
    sampled = (TARGET != 0) & (np.arange(TARGET.shape[1]) > 0)
    assert (inputs[sampled] != TARGET[sampled]).mean() > 0.7  # (30 tokens, an untrained model)
    # The decoder read exactly these tokens: teacher forcing on them gives the same logits.
    again = model({"source_ids": SOURCE, "target_ids": inputs}, training=True).numpy()
    real = LABELS != 0
    np.testing.assert_allclose(logits.numpy()[real], again[real], rtol=1e-5, atol=1e-6)
    # A function of (seed, step): repeated exactly, different at another step or seed.
    np.testing.assert_array_equal(sampling.decode(FEATURES, 1)[1].numpy(), inputs)
    assert (sampling.decode(FEATURES, 2)[1].numpy() != inputs).any()
    other = ScheduledSampling(model, spec, "linear", 1.0, seed=4)
    assert (other.decode(FEATURES, 1)[1].numpy() != inputs).any()
    # The same in a traced function (the trainer's), with the step as a tensor.
    traced = tf.function(lambda features, step: sampling.decode(features, step)[1])
    np.testing.assert_array_equal(traced(FEATURES, tf.constant(1, tf.int64)).numpy(), inputs)


def test_samples_follow_the_models_previous_distribution():
    # 4,000 copies of one sentence pair: position 1 reads a token drawn from softmax(logits_0),
    # the model's distribution after START (the same for every copy).
    model, spec = tiny("rnn-attention")
    n = 4000
    features = {
        "source_ids": np.repeat(SOURCE[:1], n, 0),
        "target_ids": np.repeat(TARGET[:1], n, 0),
    }
    sampling = ScheduledSampling(model, spec, "exponential", 0.5)  # epsilon_200 ~ 6e-61
    logits, inputs = sampling.decode(features, 200)
    p = tf.nn.softmax(logits[0, 0]).numpy()
    counts = np.bincount(inputs[:, 1].numpy(), minlength=p.size) / n
    # Each frequency within 5 binomial standard deviations of its probability.
    bound = 5 * np.sqrt(p * (1 - p) / n) + 1e-3
    assert np.all(np.abs(counts - p) <= bound), np.abs(counts - p) / bound


@pytest.mark.parametrize("step", [200, 500, 900])
def test_the_share_of_gold_inputs_is_epsilon(step):
    # A model that always samples token 7 (its output bias), gold targets without 7: an input
    # equal to the gold token is a coin that chose the gold one.
    model, spec = tiny("rnn-luong", target_vocab=12)
    bias = model.get_layer("output_projection").bias
    bias.assign(np.where(np.arange(12) == 7, 100.0, 0.0).astype("float32"))
    rows, length = 250, 9
    rng = np.random.default_rng(step)
    gold = np.concatenate(
        [np.full((rows, 1), 2), rng.choice([4, 5, 6, 8, 9, 10], (rows, length - 1))], 1
    )
    features = {"source_ids": np.repeat(SOURCE[:1], rows, 0), "target_ids": gold.astype("int32")}
    sampling = ScheduledSampling(model, spec, "linear", 1e-3, seed=step)
    epsilon = float(sampling.epsilon(step))
    assert epsilon == pytest.approx(1 - step / 1000)
    inputs = sampling.decode(features, step)[1].numpy()[:, 1:]
    assert set(np.unique(inputs)) <= {7, *np.unique(gold[:, 1:])}
    n = inputs.size  # 2,000 coins
    share = (inputs == gold[:, 1:]).mean()
    # Within 4 binomial standard deviations (a false alarm about once in 16,000).
    assert abs(share - epsilon) <= 4 * math.sqrt(epsilon * (1 - epsilon) / n), (share, epsilon)
    # Coins are drawn per token, not per sentence: rows are mixed.
    per_row = (inputs == gold[:, 1:]).mean(1)
    assert ((per_row > 0) & (per_row < 1)).mean() > 0.5


# Flags and errors.


def parse(*flags):
    return build_parser().parse_args(["train", "--out", "run", *flags])


def test_flags_parse_and_default_to_teacher_forcing(capsys):
    args = parse()
    assert (args.scheduled_sampling, args.sampling_constant, args.sampling_floor) == (None,) * 3
    args = parse("--scheduled-sampling", "inverse-sigmoid", "--sampling-constant", "300")
    assert (args.scheduled_sampling, args.sampling_constant) == ("inverse-sigmoid", 300.0)
    args = parse("--scheduled-sampling", "linear", "--sampling-constant", "1e-4",
                 "--sampling-floor", "0.2")  # fmt: skip
    assert (args.sampling_constant, args.sampling_floor) == (1e-4, 0.2)
    with pytest.raises(SystemExit):
        parse("--scheduled-sampling", "cosine")
    assert "--scheduled-sampling" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "max(--sampling-floor, 1 - c i)" in help_text
    assert "k / (k + exp(i / k))" in help_text and "k^i" in help_text


ALL = {"scheduled_sampling", "sampling_constant", "sampling_floor"}


@pytest.mark.parametrize(
    "options,fields,match",
    [
        ({"model": "transformer", "scheduled_sampling": "linear"}, {"scheduled_sampling", "model"},
         "scheduled_sampling='linear' applies to the RNN translators .* model='transformer'"),
        ({"model": "gpt", "scheduled_sampling": "exponential"}, {"scheduled_sampling", "model"},
         "not model='gpt'"),
        ({"sampling_constant": 0.5}, {"sampling_constant", "scheduled_sampling"},
         "sampling_constant needs scheduled_sampling"),
        ({"sampling_floor": 0.1}, {"sampling_floor", "scheduled_sampling"},
         "sampling_floor needs scheduled_sampling"),
        ({"scheduled_sampling": "linear", "sampling_constant": 0.0}, ALL,
         r"the slope c in \(0, 1\]. Received: sampling_constant=0.0"),
        ({"scheduled_sampling": "linear", "sampling_constant": 1.5}, ALL, "=1.5"),
        ({"scheduled_sampling": "linear", "sampling_constant": math.nan}, {"sampling_constant"},
         "^sampling_constant must be a finite number, got nan"),
        ({"scheduled_sampling": "exponential", "sampling_constant": 1.0}, ALL,
         r"the base k in \(0, 1\). Received: sampling_constant=1.0"),
        ({"scheduled_sampling": "exponential", "sampling_constant": 0.0}, ALL, "=0.0"),
        ({"scheduled_sampling": "inverse-sigmoid", "sampling_constant": 0.5}, ALL,
         r"k >= 1 \(finite\). Received: sampling_constant=0.5"),
        ({"scheduled_sampling": "inverse-sigmoid", "sampling_constant": math.inf},
         {"sampling_constant"}, "^sampling_constant must be a finite number, got inf"),
        ({"scheduled_sampling": "linear", "sampling_floor": -math.inf}, {"sampling_floor"},
         "^sampling_floor must be a finite number, got -inf"),
        ({"scheduled_sampling": "exponential", "sampling_floor": 0.1}, ALL,
         "sampling_floor applies to scheduled_sampling='linear' only.*'exponential'"),
        ({"scheduled_sampling": "linear", "sampling_floor": 1.0}, ALL,
         r"sampling_floor in \[0, 1\). Received: 1.0"),
        ({"scheduled_sampling": "linear", "sampling_floor": -0.1}, ALL, "Received: -0.1"),
        ({"scheduled_sampling": "cosine"}, {"scheduled_sampling"},
         "scheduled_sampling must be one of linear, exponential, inverse-sigmoid, got 'cosine'"),
    ],
)  # fmt: skip
def test_bad_options_are_config_errors_naming_the_fields(options, fields, match):
    with pytest.raises(ConfigError, match=match) as caught:
        TrainConfig(**options).validate()
    assert set(caught.value.fields) == fields


def test_valid_options_pass_for_every_rnn_translator():
    for model in ("rnn-plain", "rnn-attention", "rnn-luong"):
        for schedule, constant in (
            ("linear", 1.0),
            ("exponential", 0.999),
            ("inverse-sigmoid", 1.0),
        ):
            TrainConfig(
                model=model, scheduled_sampling=schedule, sampling_constant=constant
            ).validate()
        TrainConfig(model=model, scheduled_sampling="linear", sampling_floor=0.0).validate()


def test_the_command_line_reports_a_bad_flag_in_one_line(tmp_path, capsys):
    flags = ["--model", "transformer", "--scheduled-sampling", "linear"]
    assert cli(["train", *flags, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--scheduled-sampling" in err and "--model" in err
    assert not (tmp_path / "run").exists()


# Runs: the trainer, resume after SIGKILL, export.

STEPS, EVERY = 12, 4
TINY = dict(
    model="rnn-luong", steps=STEPS, batch_size=16, vocab_size=60, checkpoint_every=EVERY,
    eval_sentences=0, warmup_steps=0, options={"units": 16, "embedding_dim": 8, "dropout": 0.1},
    schedule="cosine", learning_rate=0.01,
    scheduled_sampling="linear", sampling_constant=0.06,
)  # fmt: skip


def quiet(line):
    pass


def test_the_trainer_at_epsilon_one_logs_teacher_forcings_loss_and_epsilon(tmp_path, tiny_corpus):
    # Dropout off: step 1 (epsilon_0 = 1) has the teacher-forced loss; later steps sample.
    fields = dict(TINY, corpus=str(tiny_corpus), steps=3, sampling_constant=0.4)
    fields["options"] = {**TINY["options"], "dropout": 0.0}
    train(tmp_path / "ss", TrainConfig(**fields), progress=False, log=quiet)
    forced = dict(fields, scheduled_sampling=None, sampling_constant=None)
    train(tmp_path / "tf", TrainConfig(**forced), progress=False, log=quiet)
    ours, theirs = (read_train_log(tmp_path / name / "train_log.tsv") for name in ("ss", "tf"))
    assert ours[0][1] == pytest.approx(theirs[0][1], rel=1e-6)
    assert ours[0][2] == pytest.approx(theirs[0][2], rel=1e-6)
    assert abs(ours[2][1] - theirs[2][1]) > 1e-4  # epsilon_2 = 0.2: mostly samples
    events = [
        (event.step, value.tag, tf.make_ndarray(value.tensor))
        for path in (tmp_path / "ss" / "logs").iterdir()
        for event in tf.compat.v1.train.summary_iterator(str(path))
        for value in event.summary.value
    ]
    epsilons = [(step, float(v)) for step, tag, v in events if tag == "scheduled_sampling_epsilon"]
    assert epsilons == [(3, pytest.approx(0.2))]  # the epsilon step 3 ran with (i = 2)


def architecture(model: keras.Model) -> str:
    """The model's JSON without the counters Keras appends to default layer names ("lstm_3"),
    which count the layers a process built before."""
    return re.sub(r"(?<=[a-z])_\d+(?=[/\"])", "", model.to_json())


def launch(server, run, corpus) -> ForkedProcess:
    values = {**TINY, **TINY["options"]}
    flags = [f"--{name.replace('_', '-')}={v}" for name, v in values.items() if name != "options"]
    argv = ["train", *flags, f"--corpus={corpus}", "--quiet", "--resume", "--out", str(run)]
    return server.launch({"checkpoint": 2 * EVERY, "recorded": True}, argv)


def test_sigkill_then_resume_equals_the_uninterrupted_run_and_exports(
    tmp_path, tiny_corpus, fork_server
):
    config = TrainConfig(**TINY, corpus=str(tiny_corpus))
    reference = tmp_path / "reference"
    train(reference, config, progress=False, log=quiet)
    losses = [row[1] for row in read_train_log(reference / "train_log.tsv")]
    assert losses[-1] < losses[0] - 0.3  # it learns while sampling (epsilon_11 = 0.34)

    run = tmp_path / "run"
    process = launch(fork_server, run, tiny_corpus)  # killed right after recording checkpoint 8
    output, _ = process.communicate(timeout=600)
    assert process.returncode == -signal.SIGKILL, output
    assert len(read_train_log(run / "train_log.tsv")) == 2 * EVERY
    metrics = train(run, config, resume=True, progress=False, log=quiet)
    assert metrics["steps_this_session"] == STEPS - 2 * EVERY

    ours, theirs = checkpoint_values(run), checkpoint_values(reference)
    assert sorted(ours) == sorted(theirs)
    for name in theirs:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-6, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(
        np.array(read_train_log(run / "train_log.tsv")),
        np.array(read_train_log(reference / "train_log.tsv")),
        rtol=1e-6, atol=1e-7,
    )  # fmt: skip

    # The exported model is the teacher-forced model's (the model the trainer's task builds for
    # this run's config without scheduled sampling): same architecture, the contract holds.
    saved = RunDirectory(run)
    forced = dataclasses.replace(saved.read_config(), scheduled_sampling=None,
                                 sampling_constant=None)  # fmt: skip
    family = get_family(forced.model)
    ours, theirs = saved.load_model(), get_task(family.task).build_model(saved, forced, family)
    assert architecture(ours) == architecture(theirs)
    assert [tuple(v.shape) for v in ours.weights] == [tuple(v.shape) for v in theirs.weights]
    base = tmp_path / "models"
    assert cli(["export", str(run), "--model_base_path", str(base)]) == 0  # runs the contract
    import tensorflow_text  # noqa: F401  (the exported tokenizers' ops)

    loaded = tf.saved_model.load(str(base / "1"))
    out = loaded.signatures["translate_with_alignment"](text=tf.constant(["el gato 7 come pan"]))
    assert out["tokens"].shape[0] == 1 and np.all(np.isfinite(out["scores"].numpy()))
