"""Visual question answering on the generated scenes corpus.

`--corpus scenes` (64-pixel images) or `scenes-N` (N-pixel images) generates
`keras_attn.vision.question_splits` from `--seed`: the questions of `--train-examples` training
scenes (default 2000) and of the dev scenes (at most 200; `--eval-sentences` caps the dev
questions scored). The question vocabulary is the question words
(`keras_attn.vision.QUESTION_WORDS`) after the reserved tokens, one token per word; the answers
(`keras_attn.vision.ANSWERS`) are written to `labels.txt`, by label.

Batches are `({"images": uint8 (batch, H, W, 3), "question_ids": (batch, T)}, labels =
answer ids (batch,))`; the loss is the cross-entropy of the answer.

Dev metrics: accuracy overall and by question type, the majority-answer baseline of each type
(the training split's most common answer of that type), and for the colour questions the
attention mass on the asked object's regions against a uniform map's.
"""

from __future__ import annotations

import collections
import os

import keras
import numpy as np
import tensorflow as tf

from keras_attn.formats import LABELS, VOCAB, RunDirectory
from keras_attn.models.families import ModelFamily
from keras_attn.text.vocab import RESERVED_TOKENS, save_vocab
from keras_attn.training.config import TrainConfig
from keras_attn.training.data import ExamplePlan, pad
from keras_attn.training.tasks.base import Task
from keras_attn.training.tasks.captioning import scene_image_size
from keras_attn.vision.questions import (
    ANSWERS,
    QUESTION_TYPES,
    QUESTION_WORDS,
    asked_regions,
    question_splits,
)
from keras_attn.vision.scenes import DEFAULT_SPLIT_SIZES

EVAL_BATCH = 256
# The question type whose attention is checked against the asked object's regions.
ATTENTION_TYPE = "colour"


def question_vocabulary() -> list[str]:
    """The reserved tokens, then every question word: one id per word."""
    return [*RESERVED_TOKENS, *QUESTION_WORDS]


def question_ids(questions, tokenizer) -> list[np.ndarray]:
    """The token ids of each question's text (no START/END)."""
    ids = tokenizer.tokenize(tf.constant([q.question for q in questions])).to_list()
    return [np.asarray(row, np.int32) for row in ids]


def majority_answers(questions) -> dict[str, str]:
    """`{question type: its most common answer among questions}` (ties: the first seen)."""
    counts = collections.defaultdict(collections.Counter)
    for question in questions:
        counts[question.type][question.answer] += 1
    return {kind: count.most_common(1)[0][0] for kind, count in counts.items()}


def predict_answers(model, tokenizer, questions) -> tuple[np.ndarray, np.ndarray]:
    """`(answer ids (n,), region attention (n, H', W'))` of the model on `questions`."""
    ids = question_ids(questions, tokenizer)
    answers, maps = [], []
    for begin in range(0, len(questions), EVAL_BATCH):
        chosen = questions[begin : begin + EVAL_BATCH]
        features = {
            "images": np.stack([q.scene.image for q in chosen]),
            "question_ids": pad(ids[begin : begin + len(chosen)]),
        }
        outputs = model(features, training=False)
        answers.append(np.asarray(outputs["logits"]).argmax(-1))
        maps.append(np.asarray(outputs["attention"], np.float32))
    return np.concatenate(answers), np.concatenate(maps)


def score_answers(questions, predicted, attention, majority: dict[str, str]) -> dict:
    """Accuracy of `predicted` (answer ids) on `questions`, overall and by type, each type's
    majority-answer accuracy (`majority`: type → answer), and for the colour questions the
    mean attention mass on the asked object's regions (`attention_on_object`) and the mean
    share of the regions they are (`attention_uniform`: a uniform map's mass on them).

    Returns:
        `{"accuracy", "accuracy_<type>", "majority_<type>", "questions_<type>",
        "attention_on_object", "attention_uniform"}` (a type without questions is left out).
    """
    answers = np.asarray([ANSWERS.index(q.answer) for q in questions])
    correct = np.asarray(predicted) == answers
    metrics = {"accuracy": float(correct.mean()) if len(questions) else 0.0}
    types = np.asarray([q.type for q in questions])
    for kind in QUESTION_TYPES:
        chosen = types == kind
        if not chosen.any():
            continue
        metrics[f"accuracy_{kind}"] = float(correct[chosen].mean())
        hits = [q.answer == majority.get(kind) for q, c in zip(questions, chosen, strict=True) if c]
        metrics[f"majority_{kind}"] = float(np.mean(hits))
        metrics[f"questions_{kind}"] = int(chosen.sum())
    on_object, uniform = [], []
    for question, maps in zip(questions, attention, strict=True):
        if question.type == ATTENTION_TYPE:
            cells = asked_regions(question, maps.shape)
            on_object.append(float(maps[cells].sum()))
            uniform.append(float(cells.mean()))
    if on_object:
        metrics["attention_on_object"] = float(np.mean(on_object))
        metrics["attention_uniform"] = float(np.mean(uniform))
    return metrics


class QuestionAnsweringTask(Task):
    """Visual question answering on generated scenes: image and question → answer logits and
    the region attention map."""

    def load_data(self, config: TrainConfig, family: ModelFamily) -> dict:
        image_size = scene_image_size(config.corpus)
        train = (
            DEFAULT_SPLIT_SIZES["train"] if config.train_examples is None else config.train_examples
        )
        sizes = {"train": train, "dev": DEFAULT_SPLIT_SIZES["dev"]}
        return question_splits(seed=config.seed, sizes=sizes, image_size=image_size)

    def prepare_run(self, run, config, family, data, log, init_run=None) -> None:
        if not run.file(LABELS).exists():
            run.write_text(LABELS, "".join(f"{answer}\n" for answer in ANSWERS))
        super().prepare_run(run, config, family, data, log, init_run)

    def vocabularies(self, config: TrainConfig, family: ModelFamily) -> dict[str, list[str]]:
        return {VOCAB: list(RESERVED_TOKENS)}

    def vocabulary_text(self, name: str, config: TrainConfig, family: ModelFamily, train) -> list:
        return [question.question for question in train]

    def build_vocabularies(self, run, config, family, train, log, init_run=None) -> None:
        """Write the question vocabulary (`question_vocabulary`), or take `init_run`'s."""
        if init_run is None and not run.file(VOCAB).exists():
            save_vocab(run.temporary(VOCAB), question_vocabulary())
            os.replace(run.temporary(VOCAB), run.file(VOCAB))
            log(f"{VOCAB}: the {len(QUESTION_WORDS)} question words")
        super().build_vocabularies(run, config, family, train, log, init_run)

    def plan(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily, train
    ) -> ExamplePlan:
        ids = question_ids(train, run.tokenizer())
        images = np.stack([question.scene.image for question in train])
        labels = np.asarray([ANSWERS.index(question.answer) for question in train], np.int32)

        def collate(indices, step):
            features = {"images": images[indices], "question_ids": pad([ids[i] for i in indices])}
            return features, labels[indices]

        return ExamplePlan(
            [len(row) for row in ids],
            config.batch_size,
            collate,
            feature_spec={
                "images": tf.TensorSpec((None, *images.shape[1:]), tf.uint8),
                "question_ids": tf.TensorSpec((None, None), tf.int32),
            },
            label_spec=tf.TensorSpec((None,), tf.int32),
            count_labels=lambda batch: tf.cast(tf.size(batch), tf.float32),
            seed=config.seed,
        )

    def describe(self, plan: ExamplePlan) -> str:
        height, width = plan.feature_spec["images"].shape[1:3]
        return f"{plan.num_examples} training questions ({height}x{width}-pixel scenes)"

    def build_model(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily
    ) -> keras.Model:
        return family.build(
            run.tokenizer().vocab_size,
            len(ANSWERS),
            scene_image_size(config.corpus),
            **config.model_hyperparameters(family),
        )

    def loss(self, labels, outputs, config: TrainConfig) -> tuple:
        logits = tf.cast(outputs["logits"], tf.float32)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
        return loss, tf.reduce_mean(correct)

    def evaluate(self, run, config, family, model, data) -> dict:
        dev = data["dev"][: config.eval_sentences]
        predicted, attention = predict_answers(model, run.tokenizer(), dev)
        scores = score_answers(dev, predicted, attention, majority_answers(data["train"]))
        metrics = {f"dev_{key}": round(value, 4) for key, value in scores.items()}
        metrics["dev_sentences"] = len(dev)  # the questions scored
        return metrics

    def summary(self, metrics: dict) -> str:
        by_type = ", ".join(
            f"{kind} {metrics[f'dev_accuracy_{kind}']:.1%} (majority "
            f"{metrics[f'dev_majority_{kind}']:.1%})"
            for kind in QUESTION_TYPES
            if f"dev_accuracy_{kind}" in metrics
        )
        return f"dev answer accuracy {metrics['dev_accuracy']:.1%}: {by_type}"
