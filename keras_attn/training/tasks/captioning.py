"""Image captioning: Show, Attend and Tell on the generated scenes corpus.

`--corpus scenes` (64-pixel images) or `scenes-N` (N-pixel images) generates
`keras_attn.vision.scene_splits` from `--seed`: `--train-examples` training scenes (default
2000), and dev and unseen-combination scenes (at most 200 each, `--eval-sentences` caps them).
The vocabulary is the caption grammar's words (`keras_attn.vision.CAPTION_WORDS`) after the
reserved tokens, one token per word, so a caption's ids are its words.

Batches are `({"images": uint8 (batch, H, W, 3), "target_ids": [START] words}, labels = words
[END])`, padded with 0 (the decoder's mask); the loss is the teacher-forced token cross-entropy.
The doubly stochastic regulariser
`lambda * sum_i (1 - sum_t alpha_ti)^2` (Xu et al., 2015, section 4.2.1; the builder's
`penalty`, 1 by default) is not part of this loss: the decoder adds it to `model.losses` on
every call, and the training loop minimises the task loss plus `sum(model.losses)`.

Dev metrics: caption BLEU and exact match of greedy captions (decoded through the model's step
view, as the exported captioner decodes them) on the dev scenes and on the unseen-combination
scenes, whose objects have (colour, shape) pairs no training scene shows.
"""

from __future__ import annotations

import inspect
import os

import keras
import numpy as np
import tensorflow as tf

from keras_attn.formats import VOCAB, RunDirectory
from keras_attn.models.families import ModelFamily
from keras_attn.models.show_attend_tell.model import show_attend_tell
from keras_attn.text.vocab import RESERVED_TOKENS, save_vocab
from keras_attn.training.config import TrainConfig
from keras_attn.training.data import ExamplePlan, pad
from keras_attn.training.metrics import (
    corpus_bleu,
    exact_match,
    masked_cross_entropy,
    masked_token_accuracy,
)
from keras_attn.training.tasks.base import Task
from keras_attn.vision.scenes import CAPTION_WORDS, DEFAULT_SPLIT_SIZES, scene_splits

CORPUS = "scenes"
DEFAULT_IMAGE_SIZE = 64
# The builder's encoder halves the image once per convolutional block: sides must divide by this.
GRID_STRIDE = 2 ** len(inspect.signature(show_attend_tell).parameters["encoder_filters"].default)
MIN_IMAGE_SIZE = 32  # the smallest scene `keras_attn.vision.generate_scene` draws
EVAL_BATCH = 256


def caption_vocabulary() -> list[str]:
    """The reserved tokens, then every word of the caption grammar: one id per word."""
    return [*RESERVED_TOKENS, *CAPTION_WORDS]


def scene_image_size(corpus: str) -> int:
    """The image side of a scenes corpus name: `scenes` → 64, `scenes-N` → N.

    Raises:
        ValueError: not a scenes corpus, or a side below 32 or not divisible by the encoder's
            stride (8).
    """
    if corpus == CORPUS:
        return DEFAULT_IMAGE_SIZE
    prefix = f"{CORPUS}-"
    side = corpus[len(prefix) :] if corpus.startswith(prefix) else ""
    if not side.isdigit():
        raise ValueError(
            f"Expected a captioning corpus {CORPUS!r} or '{CORPUS}-N' (N-pixel images). "
            f"Received: corpus={corpus!r}"
        )
    size = int(side)
    if size < MIN_IMAGE_SIZE or size % GRID_STRIDE:
        raise ValueError(
            f"Expected an image size of at least {MIN_IMAGE_SIZE} pixels, divisible by "
            f"{GRID_STRIDE}. Received: corpus={corpus!r}"
        )
    return size


def caption_examples(scenes, tokenizer) -> tuple[np.ndarray, list[np.ndarray]]:
    """`(images uint8 (n, H, W, 3), [START] caption ids [END] per scene)`."""
    images = np.stack([scene.image for scene in scenes])
    ids = tokenizer.tokenize(tf.constant([scene.caption for scene in scenes])).to_list()
    start, end = tokenizer.start_id, tokenizer.end_id
    return images, [np.asarray([start, *row, end], np.int32) for row in ids]


class CaptioningTask(Task):
    """Show, Attend and Tell on generated scenes: images → caption logits and attention maps."""

    def load_data(self, config: TrainConfig, family: ModelFamily) -> dict:
        image_size = scene_image_size(config.corpus)
        train = (
            DEFAULT_SPLIT_SIZES["train"] if config.train_examples is None else config.train_examples
        )
        held_out = min(config.eval_sentences, DEFAULT_SPLIT_SIZES["dev"])
        sizes = {"train": train, "dev": held_out, "unseen": held_out}
        return scene_splits(seed=config.seed, sizes=sizes, image_size=image_size)

    def vocabularies(self, config: TrainConfig, family: ModelFamily) -> dict[str, list[str]]:
        return {VOCAB: list(RESERVED_TOKENS)}

    def vocabulary_text(self, name: str, config: TrainConfig, family: ModelFamily, train) -> list:
        return [scene.caption for scene in train]

    def build_vocabularies(self, run, config, family, train, log, init_run=None) -> None:
        """Write the caption vocabulary (`caption_vocabulary`), or take `init_run`'s."""
        if init_run is None and not run.file(VOCAB).exists():
            save_vocab(run.temporary(VOCAB), caption_vocabulary())
            os.replace(run.temporary(VOCAB), run.file(VOCAB))
            log(f"{VOCAB}: the {len(CAPTION_WORDS)} caption words")
        super().build_vocabularies(run, config, family, train, log, init_run)

    def plan(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily, train
    ) -> ExamplePlan:
        images, captions = caption_examples(train, run.tokenizer())

        def collate(indices, step):
            ids = pad([captions[i] for i in indices])  # (batch, T + 1)
            labels = ids[:, 1:]
            # A shorter caption's END is no input: the decoder's steps (and the regulariser's
            # sum over them) are the caption's words and END, as its labels.
            inputs = np.where(labels != 0, ids[:, :-1], 0)
            return {"images": images[indices], "target_ids": inputs}, labels

        return ExamplePlan(
            [len(ids) for ids in captions],
            config.batch_size,
            collate,
            feature_spec={
                "images": tf.TensorSpec((None, *images.shape[1:]), tf.uint8),
                "target_ids": tf.TensorSpec((None, None), tf.int32),
            },
            seed=config.seed,
        )

    def describe(self, plan: ExamplePlan) -> str:
        height, width = plan.feature_spec["images"].shape[1:3]
        return f"{plan.num_examples} training scenes ({height}x{width} pixels)"

    def build_model(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily
    ) -> keras.Model:
        return family.build(
            run.tokenizer().vocab_size,
            scene_image_size(config.corpus),
            **config.model_hyperparameters(family),
        )

    def loss(self, labels, outputs, config: TrainConfig) -> tuple:
        """The teacher-forced caption cross-entropy (mean over the words and END) and token
        accuracy; the attention regulariser is in the model's `losses` (see the module)."""
        logits = outputs["logits"]
        loss = masked_cross_entropy(labels, logits, label_smoothing=config.label_smoothing)
        return loss, masked_token_accuracy(labels, logits)

    def evaluate(self, run, config, family, model, data) -> dict:
        captioner = self._captioner(run, family, model)
        metrics = {}
        for split in ("dev", "unseen"):
            scenes = data[split][: config.eval_sentences]
            scores = evaluate_captions(captioner, scenes)
            metrics[f"{split}_bleu"] = round(scores["bleu"], 2)
            metrics[f"{split}_exact_match"] = round(scores["exact_match"], 4)
            metrics[f"{split}_sentences"] = len(scenes)
        return metrics

    def attention_images(self, run, config, family, model, data, count) -> list:
        """The first `count` dev scenes with each word's attention map over the image."""
        from keras_attn.training.watch import overlay_image

        scenes = data["dev"][:count]
        if not scenes:
            return []
        images = np.stack([scene.image for scene in scenes])
        found = self._captioner(run, family, model).caption_pixels(tf.constant(images))
        pictures = []
        for i, scene in enumerate(scenes):
            words = [token.decode() for token in found["tokens"][i].numpy() if token]
            maps = found["attention"][i].numpy()[: len(words)]
            caption = found["caption"][i].numpy().decode()
            pictures.append(overlay_image(scene.image, words, maps, caption) if words else None)
        return pictures

    def _captioner(self, run, family, model):
        """The greedy captioner of `model` that scores the dev scenes."""
        from keras_attn.export.captioner import MAX_CAPTION_TOKENS, Captioner

        def make():
            steps = family.decoding_steps(model, MAX_CAPTION_TOKENS)
            return Captioner(model, steps, run.tokenizer(), MAX_CAPTION_TOKENS)

        return self.cached_evaluator(model, (str(run.path),), make)

    def summary(self, metrics: dict) -> str:
        return (
            f"dev caption BLEU {metrics['dev_bleu']:.2f}, exact match "
            f"{metrics['dev_exact_match']:.1%}; unseen combinations: BLEU "
            f"{metrics['unseen_bleu']:.2f}, exact match {metrics['unseen_exact_match']:.1%}"
        )


def evaluate_captions(captioner, scenes) -> dict:
    """Caption BLEU (sacrebleu) and exact match of `captioner`'s captions of `scenes`.

    Returns:
        `{"bleu", "exact_match", "hypotheses", "references"}` (0 for no scenes).
    """
    hypotheses = []
    for begin in range(0, len(scenes), EVAL_BATCH):
        images = np.stack([scene.image for scene in scenes[begin : begin + EVAL_BATCH]])
        captions = captioner.caption_pixels(tf.constant(images))["caption"].numpy()
        hypotheses.extend(caption.decode("utf-8") for caption in captions)
    references = [scene.caption for scene in scenes]
    return {
        "bleu": corpus_bleu(hypotheses, references) if scenes else 0.0,
        "exact_match": exact_match(hypotheses, references),
        "hypotheses": hypotheses,
        "references": references,
    }
