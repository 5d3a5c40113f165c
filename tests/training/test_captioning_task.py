"""The captioning task of `keras-attn train --model show-attend-tell`: scenes, batches, loss,
regulariser, greedy evaluation, and the `attention` option's per-family choices."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli import build_parser
from keras_attn.errors import ConfigError
from keras_attn.export.captioner import Captioner
from keras_attn.formats import VOCAB, RunDirectory
from keras_attn.models.families import get_family
from keras_attn.training.config import TrainConfig
from keras_attn.training.tasks import get_task
from keras_attn.training.tasks.captioning import (
    caption_vocabulary,
    evaluate_captions,
    scene_image_size,
)
from keras_attn.training.trainer import train
from keras_attn.vision import CAPTION_WORDS, HELD_OUT_PAIRS, scene_splits

FAMILY = get_family("show-attend-tell")
TASK = get_task("captioning")


def config(**fields) -> TrainConfig:
    """A tiny show-attend-tell run's config; `fields` may name the family's options too."""
    values = dict(
        model="show-attend-tell", corpus="scenes-32", train_examples=24, eval_sentences=6,
        batch_size=8,
    )  # fmt: skip
    options = {"units": 16, "embedding_dim": 8, "dropout": 0.0}
    for name in FAMILY.option_names:
        if name in fields:
            options[name] = fields.pop(name)
    return TrainConfig(**{**values, **fields}, options=options)


@pytest.fixture
def run(tmp_path):
    """A run directory with the captioning vocabulary, as `prepare_run` writes it."""
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    TASK.prepare_run(run, config(), FAMILY, {"train": []}, log=lambda line: None)
    return run


def test_corpus_names_give_the_image_size():
    assert scene_image_size("scenes") == 64
    assert scene_image_size("scenes-32") == 32 and scene_image_size("scenes-96") == 96
    for corpus in ("scenes-36", "scenes-16", "scenes-", "scenes-x", "synthetic"):
        with pytest.raises(ValueError, match=f"corpus={corpus!r}"):
            scene_image_size(corpus)


def test_a_bad_corpus_is_a_config_error_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="scenes-36") as error:
        train(tmp_path / "run", config(corpus="scenes-36"), log=lambda line: None)
    assert error.value.fields == ("corpus",)
    assert not (tmp_path / "run").exists()


def test_attention_choices_depend_on_the_family():
    for attention in ("soft", "hard"):
        config(attention=attention).validate()
    TrainConfig(model="rnn-luong", options={"attention": "local-p"}).validate()
    for model, attention, allowed in (
        ("show-attend-tell", "global", "soft, hard"),
        ("rnn-luong", "hard", "global, local-m, local-p"),
    ):
        with pytest.raises(ConfigError, match=f"must be one of {allowed}, got '{attention}'") as e:
            TrainConfig(model=model, options={"attention": attention}).validate()
        assert e.value.fields == ("attention",)
    with pytest.raises(ConfigError, match="attention does not apply to model='rnn-attention'"):
        TrainConfig(model="rnn-attention", options={"attention": "soft"}).validate()
    flags = ["train", "--out", "r", "--model", "show-attend-tell", "--attention", "hard"]
    assert getattr(build_parser().parse_args(flags), "options.attention") == "hard"


def test_penalty_reaches_the_builder_and_applies_to_show_attend_tell_only(run):
    flags = ["train", "--out", "r", "--model", "show-attend-tell", "--penalty", "0.25"]
    assert getattr(build_parser().parse_args(flags), "options.penalty") == 0.25
    assert config(penalty=0.25).model_hyperparameters(FAMILY)["penalty"] == 0.25
    assert config().model_hyperparameters(FAMILY)["penalty"] == 1.0  # the builder's
    model = TASK.build_model(run, config(penalty=0.0), FAMILY)
    decoder = next(layer for layer in model.layers if hasattr(layer, "penalty"))
    assert decoder.penalty == 0.0
    with pytest.raises(ConfigError, match="penalty must be a finite number >= 0, got -1.0") as e:
        config(penalty=-1.0).validate()
    assert e.value.fields == ("penalty",)
    with pytest.raises(ConfigError, match="penalty does not apply to model='rnn-luong'"):
        TrainConfig(model="rnn-luong", options={"penalty": 0.5}).validate()


def test_splits_follow_the_flags_and_keep_held_out_pairs_out_of_training():
    splits = TASK.load_data(config(train_examples=30, eval_sentences=5), FAMILY)
    assert [len(splits[name]) for name in ("train", "dev", "unseen")] == [30, 5, 5]
    assert splits["train"][0].image.shape == (32, 32, 3)
    reference = scene_splits(0, {"train": 30, "dev": 5, "unseen": 5}, image_size=32)
    assert [s.caption for s in splits["train"]] == [s.caption for s in reference["train"]]
    for scene in splits["train"]:
        assert all((o.colour, o.shape) not in HELD_OUT_PAIRS for o in scene.objects)
    for scene in splits["unseen"]:
        assert any((o.colour, o.shape) in HELD_OUT_PAIRS for o in scene.objects)
    capped = TASK.load_data(config(train_examples=None, eval_sentences=1000), FAMILY)
    assert [len(capped[name]) for name in ("train", "dev", "unseen")] == [2000, 200, 200]


def test_the_vocabulary_is_one_token_per_caption_word(run):
    vocab = run.file(VOCAB).read_text().split()
    assert vocab == caption_vocabulary() and vocab[4:] == list(CAPTION_WORDS)
    tokenizer = run.tokenizer()
    caption = "a small red circle to the left of a large blue square and a small white diamond"
    ids = tokenizer.tokenize(tf.constant([caption])).to_list()[0]
    assert [vocab[i] for i in ids] == caption.split()


def test_batches_are_images_and_teacher_forced_captions(run):
    scenes = TASK.load_data(config(), FAMILY)["train"]
    plan = TASK.plan(run, config(), FAMILY, scenes)
    assert TASK.describe(plan) == "24 training scenes (32x32 pixels)"
    features, labels = plan.batch(5)
    members = plan.indices(5)
    np.testing.assert_array_equal(features["images"], np.stack([scenes[i].image for i in members]))
    assert features["images"].dtype == np.uint8
    tokenizer = run.tokenizer()
    assert (features["target_ids"][:, 0] == tokenizer.start_id).all()
    # Inputs are labels shifted by one, padded where the labels are: END is never an input.
    shifted = np.where(labels[:, 1:] != 0, labels[:, :-1], 0)
    np.testing.assert_array_equal(features["target_ids"][:, 1:], shifted)
    np.testing.assert_array_equal(features["target_ids"] != 0, labels != 0)
    vocab = tokenizer.vocab
    for row, index in enumerate(members):
        words = [vocab[i] for i in labels[row] if i != 0]
        assert words == [*scenes[index].caption.split(), "[END]"]
    assert float(plan.count_labels(labels)) == (labels != 0).sum()


def numpy_log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_the_loss_is_the_caption_cross_entropy_and_the_regulariser_a_model_loss(run):
    keras.utils.set_random_seed(0)
    scenes = TASK.load_data(config(), FAMILY)["train"]
    plan = TASK.plan(run, config(), FAMILY, scenes)
    model = TASK.build_model(run, config(attention="soft"), FAMILY)
    features, labels = plan.batch(0)
    outputs = model(features, training=False)
    loss, accuracy = TASK.loss(labels, outputs, config())
    # The task's loss: the mean cross-entropy over the real caption tokens (END included).
    logits, real = outputs["logits"].numpy(), labels != 0
    log_probs = np.take_along_axis(numpy_log_softmax(logits), labels[..., None], -1)[..., 0]
    np.testing.assert_allclose(float(loss), -log_probs[real].mean(), rtol=1e-5)
    assert float(accuracy) == pytest.approx((logits.argmax(-1) == labels)[real].mean())
    # The regulariser is the model's one loss: lambda = 1 times the batch mean of
    # sum_i (1 - sum_t alpha_ti)^2 over the real steps.
    alphas = outputs["attention"].numpy().reshape(*labels.shape, -1)
    penalty = ((1.0 - (alphas * real[..., None]).sum(1)) ** 2).sum(-1).mean()
    (regulariser,) = model.losses
    np.testing.assert_allclose(float(regulariser), penalty, rtol=1e-5)


def train_steps(run, features, labels, regularised: bool, steps: int = 20) -> tuple:
    """`steps` Adam steps from seed 0 on the caption loss, plus `sum(model.losses)` when
    `regularised`; returns the caption loss and the regulariser after the last step."""
    keras.utils.set_random_seed(0)
    model = TASK.build_model(run, config(attention="soft"), FAMILY)
    optimizer = keras.optimizers.Adam(0.01)
    for _ in range(steps):
        with tf.GradientTape() as tape:
            caption_loss, _ = TASK.loss(labels, model(features, training=True), config())
            total = caption_loss + sum(model.losses) if regularised else caption_loss
        optimizer.apply(tape.gradient(total, model.trainable_variables), model.trainable_variables)
    caption_loss, _ = TASK.loss(labels, model(features, training=False), config())
    return float(caption_loss), float(sum(model.losses))


def test_steps_on_the_loss_plus_model_losses_keep_the_attention_spread(run):
    # What the training loop minimises: task.loss(...) + sum(model.losses). Without the
    # regulariser the attention of 20 fitting steps piles onto a few regions (penalty 12 to 100
    # over seeds 0-2, from 0.9); with it the penalty stays below its start.
    scenes = TASK.load_data(config(), FAMILY)["train"]
    features, labels = TASK.plan(run, config(), FAMILY, scenes).batch(0)
    start = train_steps(run, features, labels, regularised=True, steps=0)
    with_penalty = train_steps(run, features, labels, regularised=True)
    without = train_steps(run, features, labels, regularised=False)
    assert with_penalty[0] < 0.8 * start[0] and without[0] < 0.8 * start[0]
    assert with_penalty[1] < start[1] and with_penalty[1] < without[1] / 5, (with_penalty, without)


def test_evaluation_scores_greedy_captions_of_dev_and_unseen_scenes(run):
    keras.utils.set_random_seed(1)
    data = TASK.load_data(config(eval_sentences=4), FAMILY)
    model = TASK.build_model(run, config(), FAMILY)
    metrics = TASK.evaluate(run, config(eval_sentences=4), FAMILY, model, data)
    assert set(metrics) == {
        f"{split}_{name}"
        for split in ("dev", "unseen")
        for name in ("bleu", "exact_match", "sentences")
    }
    assert metrics["dev_sentences"] == metrics["unseen_sentences"] == 4
    assert "dev caption BLEU" in TASK.summary(metrics)

    # The captions scored are greedy decoding through the step view, word by word.
    steps, tokenizer = FAMILY.decoding_steps(model, 0), run.tokenizer()
    captioner = Captioner(model, steps, tokenizer, max_output_length=8)
    scores = evaluate_captions(captioner, data["dev"])
    state = steps.encode(np.stack([scene.image for scene in data["dev"]]))
    tokens = np.full(4, tokenizer.start_id)
    words, ended = [[] for _ in range(4)], np.zeros(4, bool)
    for _ in range(8):
        logits, state = steps.step(tokens, state)
        logits = logits.numpy()
        logits[:, [tokenizer.pad_id, tokenizer.start_id]] = -np.inf
        tokens = logits.argmax(-1)
        for row, token in enumerate(tokens):
            ended[row] |= token == tokenizer.end_id
            if not ended[row]:
                words[row].append(tokenizer.vocab[token])
    assert scores["hypotheses"] == [" ".join(row) for row in words]
    assert scores["references"] == [scene.caption for scene in data["dev"]]


def test_attention_pictures_show_each_caption_word_over_its_scene(run):
    keras.utils.set_random_seed(1)
    data = TASK.load_data(config(eval_sentences=2), FAMILY)
    model = TASK.build_model(run, config(), FAMILY)
    pictures = TASK.attention_images(run, config(), FAMILY, model, data, 2)
    assert len(pictures) == 2
    found = TASK._captioner(run, FAMILY, model).caption_pixels(
        tf.constant(np.stack([scene.image for scene in data["dev"][:2]]))
    )
    widths = []
    for picture, tokens in zip(pictures, found["tokens"].numpy(), strict=True):
        words = [token for token in tokens if token]
        if not words:
            assert picture is None
            continue
        assert picture.dtype == np.uint8 and picture.shape[2] == 4
        assert picture[..., :3].std() > 10  # a drawing, not a blank
        widths.append((len(words), picture.shape[1]))
    assert widths, "no caption had a word"
    # One panel per word besides the image: the picture grows with the caption.
    for (words_a, width_a), (words_b, width_b) in zip(widths, widths[1:], strict=False):
        if words_a != words_b:
            assert (width_a < width_b) == (words_a < words_b)


def test_the_evaluations_of_one_model_reuse_one_captioner(run):
    model = TASK.build_model(run, config(), FAMILY)
    first = TASK._captioner(run, FAMILY, model)
    assert TASK._captioner(run, FAMILY, model) is first
    assert TASK._captioner(run, FAMILY, TASK.build_model(run, config(), FAMILY)) is not first


class Oracle:
    """Captions every image with its scene's caption (or a fixed wrong one)."""

    def __init__(self, scenes, wrong=()):
        self.captions = {scene.image.tobytes(): scene.caption for scene in scenes}
        self.wrong = set(wrong)

    def caption_pixels(self, images):
        captions = []
        for index, image in enumerate(images.numpy()):
            caption = self.captions[image.tobytes()]
            captions.append("a small red circle" if index in self.wrong else caption)
        return {"caption": tf.constant(captions)}


def test_caption_metrics_are_bleu_and_exact_match():
    scenes = scene_splits(2, {"dev": 4}, image_size=32)["dev"]
    perfect = evaluate_captions(Oracle(scenes), scenes)
    assert perfect["bleu"] == pytest.approx(100.0) and perfect["exact_match"] == 1.0
    half = evaluate_captions(Oracle(scenes, wrong={0, 1}), scenes)
    assert half["exact_match"] == 0.5 and half["bleu"] < 100.0


def test_a_resumed_hard_attention_run_repeats_the_uninterrupted_one(tmp_path):
    # Batches are a function of the step and hard attention's sampler state is checkpointed, so
    # steps 3-4 after a resume are the steps an uninterrupted run takes (on a learning-rate
    # schedule that does not depend on the step target).
    fields = dict(
        attention="hard", steps=4, checkpoint_every=2, eval_sentences=0,
        schedule="inverse-sqrt", warmup_steps=2,
    )  # fmt: skip
    quiet = dict(log=lambda line: None, progress=False)
    train(tmp_path / "whole", config(**fields), **quiet)
    train(tmp_path / "parts", config(**{**fields, "steps": 2}), **quiet)
    resumed = train(tmp_path / "parts", config(**fields), resume=True, **quiet)
    assert resumed["steps_this_session"] == 2
    logs = [(tmp_path / name / "train_log.tsv").read_text() for name in ("whole", "parts")]
    assert logs[0] == logs[1] and len(logs[0].splitlines()) == 5
