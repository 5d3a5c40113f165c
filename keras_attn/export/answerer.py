"""The served visual question answerer: image bytes and a question in; the answer, its
probabilities and the attention maps out, in one graph."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from keras_attn.errors import ConfigError
from keras_attn.export.captioner import IMAGE_SPEC, decode_images, sample_images
from keras_attn.export.contract import answerer_signatures, check_answerer_saved_model
from keras_attn.export.saved_model import _publish
from keras_attn.formats import LABELS, RunDirectory, load_finite_model

QUESTION_SPEC = tf.TensorSpec([None], tf.string, name="question")
# The most question tokens the model reads (the longest generated question has 5 words and "?").
MAX_QUESTION_TOKENS = 32
SAMPLE_QUESTIONS = ("what colour is the square?", "how many shapes are there?", "")


class Answerer(tf.Module):
    """Image bytes and a question in, the answer out: the path the exported signatures wrap.

    image `[batch]` PNG or JPEG bytes → uint8 `(batch, H, W, 3)` (decoded, resized to the
    model's size when it differs, as the captioner does); question `[batch]` strings → the
    tokenizer (in the graph) → ids `(batch, T)`, at most `max_question_length` tokens → the
    model → answer logits and attention maps.

    `answer` (a `tf.function` with a fixed input signature) returns `answer` `[batch]` string
    (the most probable answer), `classes` `[batch, A]` string (every answer, by label),
    `scores` `[batch, A]` float32 (their probabilities), `attention` `[batch, H', W']` float32
    (the region weights `a^v`), `tokens` `[batch, T]` string (the question's tokens, padded
    with "") and `question_attention` `[batch, T]` float32 (the word weights `a^q`, zero on
    padding). `answer_pixels` is the same on uint8 images (in-process evaluation).

    Args:
        model: a `keras_attn.models.vqa_coattention` model (tracked so that the SavedModel
            holds its variables).
        tokenizer: the question `keras_attn.text.tokenizer.WordPieceTokenizer`.
        answers: the answer names, by label.
        max_question_length: the most question tokens read.

    Raises:
        keras_attn.errors.ConfigError: `answers` not one name per answer logit, or a
            `max_question_length` below 1.

    References:
        Lu, Yang, Batra and Parikh, 2016, "Hierarchical Question-Image Co-Attention for Visual
        Question Answering", arXiv:1606.00061.
    """

    def __init__(
        self,
        model,
        tokenizer,
        answers: Sequence[str],
        max_question_length: int = MAX_QUESTION_TOKENS,
        name: str = "answerer",
    ):
        super().__init__(name=name)
        answers = [str(answer) for answer in answers]
        num_answers = int(model.output["logits"].shape[-1])
        if len(answers) != num_answers:
            raise ConfigError(
                f"Expected {num_answers} answer names (one per logit). Received: "
                f"{len(answers)} answers",
                ["answers"],
            )
        if isinstance(max_question_length, bool) or int(max_question_length) < 1:
            raise ConfigError(
                "Expected max_question_length >= 1. Received: "
                f"max_question_length={max_question_length!r}",
                ["max_question_length"],
            )
        self.model = model
        self.tokenizer = tokenizer
        self.answers = answers
        self.max_question_length = int(max_question_length)
        self.image_shape = tuple(int(side) for side in model.input["images"].shape[1:3])
        self.grid_shape = tuple(int(side) for side in model.output["attention"].shape[1:3])
        self._answer_names = tf.constant(answers, tf.string)
        pixels = tf.TensorSpec([None, *self.image_shape, 3], tf.uint8, name="images")
        self.answer_pixels = tf.function(
            self._answer, input_signature=[pixels, QUESTION_SPEC], autograph=False
        )

    def question_ids(self, question):
        """Question strings `[batch]` → int32 ids `(batch, T)`, `1 <= T <= max_question_length`,
        padded with 0."""
        ids = self.tokenizer.tokenize(question)[:, : self.max_question_length].to_tensor(0)
        missing = tf.maximum(1 - tf.shape(ids)[1], 0)  # a batch of empty questions: one pad
        return tf.cast(tf.pad(ids, [[0, 0], [0, missing]]), tf.int32)

    def _answer(self, images, question):
        tf.debugging.assert_equal(
            tf.shape(images)[0],
            tf.shape(question)[0],
            message="image and question have different batch sizes",
        )
        ids = self.question_ids(question)
        outputs = self.model({"images": images, "question_ids": ids}, training=False)
        scores = tf.nn.softmax(tf.cast(outputs["logits"], tf.float32), axis=-1)  # (batch, A)
        batch_size = tf.shape(scores)[0]
        words = tf.cast(tf.not_equal(ids, 0), tf.float32)
        return {
            "answer": tf.gather(self._answer_names, tf.argmax(scores, axis=-1)),
            "classes": tf.tile(self._answer_names[None], [batch_size, 1]),
            "scores": scores,
            "attention": tf.cast(outputs["attention"], tf.float32),
            "tokens": self.tokenizer.id_to_token(ids),
            "question_attention": tf.cast(outputs["question_attention"], tf.float32) * words,
        }

    @tf.function(input_signature=[IMAGE_SPEC, QUESTION_SPEC], autograph=False)
    def answer(self, image, question):
        return self._answer(decode_images(image, self.image_shape), question)


def answerer_from_run(run_path: str | os.PathLike) -> Answerer:
    """The `Answerer` of a question-answering run: its model, question vocabulary and answers
    (`labels.txt`)."""
    run = RunDirectory(run_path)
    answers = run.file(LABELS).read_text(encoding="utf-8").splitlines()
    return Answerer(load_finite_model(run), run.tokenizer(), answers)


def answerer_warmup_feeds(images: Sequence[bytes], questions: Sequence[str], grid_shape) -> dict:
    """Feeds for every answerer signature: inputs `image` and `question`, DT_STRING
    `[len(images)]`."""
    feeds = {
        "image": np.array(list(images), dtype=object),
        "question": np.array(list(questions), dtype=object),
    }
    return {signature: dict(feeds) for signature in answerer_signatures(1, grid_shape)}


def export_answerer(
    answerer: Answerer,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    check: bool = True,
    images: Sequence[bytes] | None = None,
    questions: Sequence[str] = SAMPLE_QUESTIONS,
) -> Path:
    """Export `answerer` as `model_base_path/<version>/` with the serving signatures.

    Signatures `serving_default` and `answer`: `image` DT_STRING `[-1]` (PNG or JPEG bytes) and
    `question` DT_STRING `[-1]` → `answer`, `classes`, `scores`, `attention` `[-1, H', W']`,
    `tokens` and `question_attention`. The version is written to a hidden temporary directory
    with one warm-up request per signature, checked by `check_answerer_saved_model` (a separate
    process importing only tensorflow and tensorflow_text answers `questions` about `images`)
    and only then renamed to its version number.

    Args:
        answerer: the `Answerer` to export.
        model_base_path: the model's base directory (created if needed).
        version: integer version; default: one more than the newest existing version (or 1).
        check: run the contract check before publishing.
        images: encoded images for the warm-up requests and the check (default:
            `sample_images` at the model's size), as many as `questions`.
        questions: the questions asked about them (an empty one included by default).

    Returns:
        The version directory.

    Raises:
        keras_attn.errors.PathExistsError: the version exists already.
        keras_attn.errors.ConfigError: a non-positive version.
        keras_attn.export.contract.ContractError: the check failed (nothing is published).
    """
    if images is None:
        images = sample_images(answerer.image_shape[0])
    images, questions = list(images), list(questions)
    endpoints = {"serving_default": answerer.answer, "answer": answerer.answer}
    grid_shape = answerer.grid_shape
    warmup = answerer_warmup_feeds(images, questions, grid_shape)

    def contract(path):
        return check_answerer_saved_model(path, images, questions, answerer.answers, grid_shape)

    return _publish(
        (answerer.model, answerer.tokenizer),
        endpoints,
        model_base_path,
        version,
        contract if check else None,
        warmup,
    )


def export_answerer_run(
    run_path: str | os.PathLike,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    check: bool = True,
) -> Path:
    """Export a question-answering run directory (`answerer_from_run`) with `export_answerer`;
    returns the version directory."""
    return export_answerer(answerer_from_run(run_path), model_base_path, version, check=check)
