"""Fine-tuning tasks: sentence classification and token classification (tagging).

The classifier families put a head on a BERT, GPT or BART backbone (`ModelFamily.backbone`);
with `--init-from` the backbone starts from a pre-trained run's weights and vocabulary. Data is
a built-in task or a tab-separated file (`keras_attn.text.classification`). Inputs are
formatted as the backbone was pre-trained:

    bert   [CLS] tokens [SEP]      segment ids 0      the head reads [CLS]
    gpt    [START] tokens [END]                       the head reads the last token
    bart   [START] tokens [END]    same ids into encoder and decoder; the head reads the last
    none   [START] tokens [END]    a classifier trained from scratch only (`text-cnn`)
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from keras_attn.formats import LABELS, VOCAB, RunDirectory
from keras_attn.models.families import ModelFamily
from keras_attn.text.classification import load_classification_data, load_tagging_data
from keras_attn.text.denoising import bart_reserved_tokens
from keras_attn.text.masked_lm import BERT_RESERVED_TOKENS, BertTokens
from keras_attn.text.vocab import RESERVED_TOKENS
from keras_attn.training.config import TrainConfig
from keras_attn.training.data import ExamplePlan, pad
from keras_attn.training.tasks.base import Task
from keras_attn.training.tasks.language_model import lm_positions
from keras_attn.training.tasks.translation import first_examples

BATCH = 256


def _reserved_tokens(backbone: str) -> list[str]:
    if backbone == "bert":
        return list(BERT_RESERVED_TOKENS)
    if backbone == "bart":
        return bart_reserved_tokens()
    return list(RESERVED_TOKENS)


class _Formatter:
    """Token ids of texts (or of pre-split words) in the backbone's input format."""

    def __init__(self, run: RunDirectory, config: TrainConfig, family: ModelFamily):
        self.tokenizer = run.tokenizer()
        self.backbone = family.backbone
        if self.backbone == "bert":
            tokens = BertTokens.from_vocab(self.tokenizer.vocab)
            self.first, self.last = tokens.cls_id, tokens.sep_id
        else:
            self.first, self.last = self.tokenizer.start_id, self.tokenizer.end_id
        self.max_tokens = config.max_length - 2

    def _ids(self, texts: list[str]) -> list[list[int]]:
        ids = []
        for begin in range(0, len(texts), 4096):
            ids.extend(self.tokenizer.tokenize(tf.constant(texts[begin : begin + 4096])).to_list())
        return ids

    def sentences(self, texts: list[str]) -> list[np.ndarray]:
        return [
            np.asarray([self.first, *ids[: self.max_tokens], self.last], np.int32)
            for ids in self._ids(texts)
        ]

    def tagged(self, sentences) -> list[tuple[np.ndarray, np.ndarray]]:
        """`(ids, labels)`: each word's first piece labelled with its tag + 1, the other pieces
        and the special tokens 0 (not scored)."""
        words = [word for tokens, _ in sentences for word in tokens]
        pieces = iter(self._ids(words))
        examples = []
        for tokens, tags in sentences:
            ids, labels = [self.first], [0]
            for _, tag in zip(tokens, tags, strict=True):
                word = next(pieces)
                ids.extend(word)
                labels.extend([tag + 1] + [0] * (len(word) - 1))
            ids, labels = ids[: self.max_tokens + 1] + [self.last], labels[: self.max_tokens + 1]
            examples.append((np.asarray(ids, np.int32), np.asarray([*labels, 0], np.int32)))
        return examples

    def features(self, ids: np.ndarray):
        if self.backbone == "bert":
            return {"token_ids": ids, "segment_ids": np.zeros_like(ids)}
        return ids

    def feature_spec(self):
        ids = tf.TensorSpec((None, None), tf.int32)
        return {"token_ids": ids, "segment_ids": ids} if self.backbone == "bert" else ids


class ClassificationTask(Task):
    """Sentence classification: logits of the classes, cross-entropy against the label.

    `--corpus` names a built-in task (`source-id`, `language-id`, `synthetic-language-id`) or a
    `text TAB label` file; `examples_per_class` keeps that many training sentences per class.
    Writes `labels.txt` (the class names by label). Dev and test accuracy go to `metrics.json`.
    """

    def load_data(self, config: TrainConfig, family: ModelFamily) -> dict:
        data = load_classification_data(config.corpus, config.seed, config.examples_per_class)
        return {
            "train": first_examples(data.train, config),
            "dev": data.dev,
            "test": data.test,
            "labels": list(data.label_names),
        }

    def prepare_run(self, run, config, family, data, log, init_run=None) -> None:
        if not run.file(LABELS).exists():
            run.write_text(LABELS, "".join(f"{name}\n" for name in data["labels"]))
        super().prepare_run(run, config, family, data, log, init_run)

    def vocabularies(self, config: TrainConfig, family: ModelFamily) -> dict[str, list[str]]:
        return {VOCAB: _reserved_tokens(family.backbone)}

    def vocabulary_text(self, name: str, config: TrainConfig, family: ModelFamily, train) -> list:
        return [text for text, _ in train]

    def _examples(self, run, config, family, split) -> tuple[_Formatter, list]:
        formatter = _Formatter(run, config, family)
        ids = formatter.sentences([text for text, _ in split])
        return formatter, list(zip(ids, [label for _, label in split], strict=True))

    def _batch_labels(self, labels: list) -> np.ndarray:
        """Hook: a batch's labels from its examples' labels, here one class each `(batch,)`."""
        return np.asarray(labels, np.int32)

    def _label_options(self) -> dict:
        """Hook: the `label_spec` and `count_labels` of the `ExamplePlan`."""
        return {
            "label_spec": tf.TensorSpec((None,), tf.int32),
            "count_labels": lambda labels: tf.cast(tf.size(labels), tf.float32),
        }

    def plan(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily, train
    ) -> ExamplePlan:
        formatter, examples = self._examples(run, config, family, train)

        def collate(indices, step):
            chosen = [examples[i] for i in indices]
            features = formatter.features(pad([ids for ids, _ in chosen]))
            return features, self._batch_labels([labels for _, labels in chosen])

        return ExamplePlan(
            [len(ids) for ids, _ in examples],
            config.batch_size,
            collate,
            feature_spec=formatter.feature_spec(),
            seed=config.seed,
            **self._label_options(),
        )

    def describe(self, plan: ExamplePlan) -> str:
        return f"{plan.num_examples} training sentences"

    def num_labels(self, run: RunDirectory) -> int:
        return len(run.file(LABELS).read_text(encoding="utf-8").splitlines())

    def build_model(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily
    ) -> keras.Model:
        extra = {}
        if family.backbone == "gpt":  # as many positions as the language model it starts from
            origin = config
            if config.init_from:
                fields = RunDirectory(config.init_from).read_config_fields()
                origin = TrainConfig.from_fields(fields)
            extra["max_length"] = lm_positions(origin)
        return family.build(
            run.tokenizer().vocab_size,
            self.num_labels(run),
            **extra,
            **config.model_hyperparameters(family),
        )

    def loss(self, labels, outputs, config: TrainConfig) -> tuple:
        logits = tf.cast(outputs, tf.float32)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
        return loss, tf.reduce_mean(correct)

    def _accuracy(self, run, config, family, model, split) -> float:
        formatter, examples = self._examples(run, config, family, split)
        correct = 0
        for begin in range(0, len(examples), BATCH):
            chosen = examples[begin : begin + BATCH]
            logits = model(formatter.features(pad([ids for ids, _ in chosen])), training=False)
            guesses = np.asarray(logits).argmax(-1)
            correct += int((guesses == np.asarray([label for _, label in chosen])).sum())
        return correct / len(examples)

    def evaluate(self, run, config, family, model, data) -> dict:
        dev = data["dev"][: config.eval_sentences]
        metrics = {"dev_accuracy": round(self._accuracy(run, config, family, model, dev), 4)}
        if data["test"]:
            test = self._accuracy(run, config, family, model, data["test"])
            metrics["test_accuracy"] = round(test, 4)
        metrics["dev_sentences"] = len(dev)
        return metrics

    def summary(self, metrics: dict) -> str:
        return f"dev accuracy {metrics['dev_accuracy']:.1%}"


class TaggingTask(ClassificationTask):
    """Token classification: one tag per word of a `tokens TAB tags` file, scored on each word's
    first WordPiece (Devlin et al., 2018, section 5.3). Writes `labels.txt` (the tag names)."""

    def load_data(self, config: TrainConfig, family: ModelFamily) -> dict:
        data = load_tagging_data(config.corpus, config.seed)
        return {
            "train": first_examples(data.train, config),
            "dev": data.dev,
            "test": data.test,
            "labels": list(data.tag_names),
        }

    def vocabulary_text(self, name: str, config: TrainConfig, family: ModelFamily, train) -> list:
        return [" ".join(tokens) for tokens, _ in train]

    def _examples(self, run, config, family, split) -> tuple[_Formatter, list]:
        formatter = _Formatter(run, config, family)
        return formatter, formatter.tagged(split)

    def _batch_labels(self, labels: list) -> np.ndarray:
        # One tag per token: padded to the batch's longest sentence.
        return pad(labels)

    def _label_options(self) -> dict:
        return {}

    def describe(self, plan: ExamplePlan) -> str:
        return f"{plan.num_examples} training sentences (tagged)"

    def loss(self, labels, outputs, config: TrainConfig) -> tuple:
        # Labels are tag + 1, 0 where nothing is scored.
        scored = tf.cast(labels > 0, tf.float32)
        logits = tf.cast(outputs, tf.float32)
        tags = tf.maximum(labels - 1, 0)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tags, logits=logits)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), tags), tf.float32)
        count = tf.reduce_sum(scored)
        return (
            tf.math.divide_no_nan(tf.reduce_sum(losses * scored), count),
            tf.math.divide_no_nan(tf.reduce_sum(correct * scored), count),
        )

    def _accuracy(self, run, config, family, model, split) -> float:
        formatter, examples = self._examples(run, config, family, split)
        correct = total = 0
        for begin in range(0, len(examples), BATCH):
            chosen = examples[begin : begin + BATCH]
            labels = pad([e[1] for e in chosen])
            logits = model(formatter.features(pad([e[0] for e in chosen])), training=False)
            guesses = np.asarray(logits).argmax(-1) + 1
            scored = labels > 0
            correct += int((guesses == labels)[scored].sum())
            total += int(scored.sum())
        return correct / total

    def summary(self, metrics: dict) -> str:
        return f"dev tag accuracy {metrics['dev_accuracy']:.1%}"
