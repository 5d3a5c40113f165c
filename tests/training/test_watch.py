"""`keras-attn train --eval-every`: dev evaluations, learning rate and gradient norm in
TensorBoard, read back from the event files."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from keras_attn.text.corpora import load_corpus
from keras_attn.training import trainer, watch
from keras_attn.training.tasks import get_task
from keras_attn.training.trainer import RunDirectory, TrainConfig, train

TINY = dict(batch_size=16, vocab_size=400, checkpoint_every=5, eval_sentences=12, max_length=16)
OPTIONS = {"units": 16, "embedding_dim": 8, "dropout": 0.0}


def events(path) -> dict:
    """`{tag: [(step, value), ...]}` of the event files in `path` (scalars as floats, images
    as decoded PNG arrays)."""
    accumulator = EventAccumulator(str(path), size_guidance={"tensors": 0})
    accumulator.Reload()
    found = {}
    for tag in accumulator.Tags()["tensors"]:
        values = []
        for event in accumulator.Tensors(tag):
            array = tf.make_ndarray(event.tensor_proto)
            if array.dtype == object:  # an image: width, height, PNG
                values.append((event.step, tf.io.decode_png(array[2]).numpy()))
            else:
                values.append((event.step, float(array)))
        found[tag] = values
    return found


@pytest.fixture(scope="module")
def watched(tmp_path_factory, tiny_corpus):
    """A tiny rnn-attention run of 4 steps, evaluated at step 2 and at the end:
    `(run, config, metrics)`."""
    out = tmp_path_factory.mktemp("watched") / "run"
    config = TrainConfig(
        model="rnn-attention", steps=4, eval_every=2, corpus=str(tiny_corpus), options=OPTIONS,
        **TINY,
    )  # fmt: skip
    metrics = train(out, config, progress=False)
    return RunDirectory(out), config, metrics


def test_dev_curves_are_written_every_n_steps_and_at_the_last(watched):
    run, config, metrics = watched
    dev = events(run.file("logs") / "dev")
    for tag in ("loss", "bleu", "exact_match", "rouge1", "rouge2", "rougeL"):
        assert [step for step, _ in dev[tag]] == [2, 4], tag
    assert dev["bleu"][-1][1] == pytest.approx(metrics["dev_bleu"])
    assert dev["exact_match"][-1][1] == pytest.approx(metrics["dev_exact_match"])
    assert all(np.isfinite(value) and value > 0 for _, value in dev["loss"])


def test_the_dev_loss_is_the_mean_token_cross_entropy_of_the_dev_pairs(watched, tiny_corpus):
    run, config, _ = watched
    model = run.load_model()
    family = config.family()
    task = get_task(family.task)
    dev = load_corpus(str(tiny_corpus), seed=config.seed)["dev"][: config.eval_sentences]
    # NumPy: one batch of every dev pair, log-softmax of the logits, mean over the labels.
    whole = task.plan(run, dataclasses.replace(config, batch_size=len(dev)), family, dev)
    features, labels = whole.batch(0)
    logits = keras.ops.convert_to_numpy(model(features, training=False)).astype(np.float64)
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                keepdims=True)) - logits.max(-1, keepdims=True)  # fmt: skip
    picked = np.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
    expected = -picked[labels != 0].mean()
    found = watch.dev_loss(task, run, config, family, model, {"dev": dev})  # batches of 16 and 8
    assert found == pytest.approx(expected, rel=1e-5)
    assert events(run.file("logs") / "dev")["loss"][-1][1] == pytest.approx(expected, rel=1e-5)


def test_attention_pictures_of_three_dev_sentences(watched):
    run, _, _ = watched
    dev = events(run.file("logs") / "dev")
    pictures = [tag for tag in dev if tag.startswith("attention/")]
    assert pictures, "no attention picture"
    assert set(pictures) <= {"attention/0", "attention/1", "attention/2"}
    for tag in pictures:
        for _, image in dev[tag]:
            assert image.ndim == 3 and image.shape[2] == 4 and min(image.shape[:2]) > 40
            assert image[..., :3].std() > 10  # a drawing, not a blank


def test_learning_rate_and_gradient_norm_are_logged_with_the_loss(watched):
    run, config, _ = watched
    logged = events(run.file("logs"))
    assert [step for step, _ in logged["learning_rate"]] == [4]
    schedule = trainer.learning_rate_schedule(run.read_config())  # the run's resolved tuning
    assert logged["learning_rate"][0][1] == pytest.approx(float(schedule(4)), rel=1e-6)
    assert [step for step, _ in logged["gradient_norm"]] == [4]
    assert np.isfinite(logged["gradient_norm"][0][1]) and logged["gradient_norm"][0][1] > 0


@pytest.mark.parametrize("scaled", [False, True], ids=["plain", "loss-scaled"])
def test_the_gradient_norm_is_that_of_the_unscaled_gradient(scaled):
    gradients = [tf.constant([3.0, 0.0]), None, tf.constant([[4.0]], tf.float16)]
    optimizer = keras.optimizers.Adam()
    if scaled:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer, initial_scale=8.0)
        optimizer.build(
            [keras.Variable(np.zeros(2))]
        )  # makes its `dynamic_scale`, as training does
        gradients = [None if g is None else g * tf.cast(8.0, g.dtype) for g in gradients]
    assert float(trainer._squared_norm(gradients, optimizer)) == pytest.approx(25.0)
