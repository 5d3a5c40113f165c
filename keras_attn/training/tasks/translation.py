"""Translation: training on `(source, target)` pairs (teacher forcing or scheduled sampling),
scored by dev BLEU."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_attn.formats import MAX_OUTPUT_LENGTH, SOURCE_VOCAB, TARGET_VOCAB, RunDirectory
from keras_attn.models.families import ModelFamily
from keras_attn.text import corpora
from keras_attn.text.normalization import normalize_text
from keras_attn.text.vocab import RESERVED_TOKENS
from keras_attn.training.config import TrainConfig
from keras_attn.training.data import BatchPlan, tokenize_pairs
from keras_attn.training.metrics import (
    ROUGE_SCORES,
    masked_cross_entropy,
    masked_token_accuracy,
)
from keras_attn.training.scheduled_sampling import ScheduledSampling, sampling_epsilon
from keras_attn.training.tasks.base import Task


def first_examples(examples: list, config: TrainConfig) -> list:
    """The first `config.train_examples` of a training split (all of it when None)."""
    return examples if config.train_examples is None else examples[: config.train_examples]


class TranslationTask(Task):
    """A translator: `{"source_ids", "target_ids"}` → logits, labels = targets shifted by one."""

    def load_data(self, config: TrainConfig, family: ModelFamily) -> dict:
        splits = corpora.load_corpus(config.corpus, seed=config.seed)
        return {**splits, "train": first_examples(splits["train"], config)}

    def vocabularies(self, config: TrainConfig, family: ModelFamily) -> dict[str, list[str]]:
        reserved = list(family.reserved_tokens or RESERVED_TOKENS)
        return {SOURCE_VOCAB: reserved, TARGET_VOCAB: reserved}

    def vocabulary_text(self, name: str, config: TrainConfig, family: ModelFamily, train) -> list:
        if family.shared_vocabulary(config.model_hyperparameters(family)):
            return [sentence for pair in train for sentence in pair]
        side = 0 if name == SOURCE_VOCAB else 1
        return [pair[side] for pair in train]

    def plan(self, run: RunDirectory, config: TrainConfig, family: ModelFamily, train) -> BatchPlan:
        source_tokenizer, target_tokenizer = run.tokenizers()
        sources, targets = tokenize_pairs(
            train, source_tokenizer, target_tokenizer, config.max_length
        )
        return BatchPlan(sources, targets, config.batch_size, seed=config.seed)

    def describe(self, plan: BatchPlan) -> str:
        return f"{plan.num_examples} training pairs"

    def build_model(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily
    ) -> keras.Model:
        source_tokenizer, target_tokenizer = run.tokenizers()
        return family.build(
            source_tokenizer.vocab_size,
            target_tokenizer.vocab_size,
            **config.model_hyperparameters(family),
        )

    def training_outputs(self, model: keras.Model, config: TrainConfig, family: ModelFamily):
        """Teacher forcing, or with `config.scheduled_sampling` the logits of
        `keras_attn.training.scheduled_sampling.ScheduledSampling`."""
        if config.scheduled_sampling is None:
            return super().training_outputs(model, config, family)
        return ScheduledSampling(
            model,
            family,
            config.scheduled_sampling,
            config.sampling_constant,
            config.sampling_floor,
            config.seed,
        )

    def training_scalars(self, config: TrainConfig, step: int) -> dict[str, float]:
        """`scheduled_sampling_epsilon`, the probability of a gold input, under scheduled
        sampling."""
        if config.scheduled_sampling is None:
            return {}
        epsilon = sampling_epsilon(
            config.scheduled_sampling, step, config.sampling_constant, config.sampling_floor
        )
        return {"scheduled_sampling_epsilon": float(epsilon)}

    def loss(self, labels, outputs, config: TrainConfig) -> tuple:
        loss = masked_cross_entropy(labels, outputs, label_smoothing=config.label_smoothing)
        return loss, masked_token_accuracy(labels, outputs)

    def evaluate(self, run, config, family, model, data) -> dict:
        from keras_attn.training.evaluation import evaluate_pairs

        dev_pairs = data["dev"][: config.eval_sentences]
        scores = evaluate_pairs(
            self._translator(run, config, family, model), dev_pairs, normalize_text
        )
        return {
            "dev_bleu": round(scores["bleu"], 2),
            "dev_exact_match": round(scores["exact_match"], 4),
            **{f"dev_{name}": round(scores[name], 2) for name in ROUGE_SCORES},
            "dev_sentences": scores["sentences"],
        }

    def attention_images(self, run, config, family, model, data, count) -> list:
        """The alignment heatmaps of the first `count` dev sentences (`translate_with_alignment`;
        none where the step view's state has no attention, None for an empty translation)."""
        from keras_attn.training.watch import alignment_image

        translator = self._translator(run, config, family, model)
        sources = [source for source, _ in data["dev"][:count]]
        if not translator.with_alignment or not sources:
            return []
        found = translator.translate_with_alignment(tf.constant(sources))
        images = []
        for i, source in enumerate(sources):
            tokens = [t.decode() for t in found["tokens"][i].numpy() if t]
            source_tokens = [t.decode() for t in found["source_tokens"][i].numpy() if t]
            weights = found["alignment"][i].numpy()[: len(tokens), : len(source_tokens)]
            drawable = tokens and source_tokens
            images.append(
                alignment_image(source_tokens, tokens, weights, source) if drawable else None
            )
        return images

    def summary(self, metrics: dict) -> str:
        rouge = "/".join(f"{metrics[f'dev_{name}']:.1f}" for name in ROUGE_SCORES)
        return (
            f"dev BLEU {metrics['dev_bleu']:.2f}, exact match {metrics['dev_exact_match']:.1%}, "
            f"ROUGE-1/2/L {rouge}"
        )

    def _translator(self, run, config: TrainConfig, family: ModelFamily, model: keras.Model):
        """The greedy translator of `model` that scores the dev split."""
        from keras_attn.export.translator import Translator

        def make():
            source_tokenizer, target_tokenizer = run.tokenizers()
            return Translator(
                model,
                family.decoding_steps(model, MAX_OUTPUT_LENGTH),
                source_tokenizer,
                target_tokenizer,
                config.max_length,
                max_output_length=MAX_OUTPUT_LENGTH,
            )

        return self.cached_evaluator(model, (str(run.path), config.max_length), make)
