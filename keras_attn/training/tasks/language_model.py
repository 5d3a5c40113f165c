"""Language modelling: next-token prediction on the corpus' target-side sentences."""

from __future__ import annotations

import keras

from keras_attn.formats import MAX_OUTPUT_LENGTH, VOCAB, RunDirectory
from keras_attn.models.families import ModelFamily
from keras_attn.text import corpora
from keras_attn.text.vocab import RESERVED_TOKENS
from keras_attn.training.config import TrainConfig
from keras_attn.training.data import BatchPlan, tokenize_sentences
from keras_attn.training.metrics import masked_cross_entropy, masked_token_accuracy
from keras_attn.training.tasks.base import Task
from keras_attn.training.tasks.translation import first_examples


def lm_positions(config: TrainConfig) -> int:
    """Learned positions of a language-model run's model.

    A training sequence is START + at most `max_length` tokens (END is only a label); the export
    keeps prompts of up to `max_length` tokens after START and generates up to
    `MAX_OUTPUT_LENGTH` tokens, so the model gets `max_length + 1 + MAX_OUTPUT_LENGTH` positions
    (those past `max_length + 1` are only reached by continuations longer than any training
    sentence).
    """
    return config.max_length + 1 + MAX_OUTPUT_LENGTH


class LanguageModelTask(Task):
    """A causal LM: token ids → next-token logits, on START … END target-side sentences."""

    def load_data(self, config: TrainConfig, family: ModelFamily) -> dict:
        """The splits of `config.corpus`; several comma-separated corpora are concatenated."""
        names = [name.strip() for name in config.corpus.split(",") if name.strip()]
        splits = {"train": [], "dev": [], "test": []}
        for name in names:
            for split, pairs in corpora.load_corpus(name, seed=config.seed).items():
                splits[split].extend(pairs)
        return {**splits, "train": first_examples(splits["train"], config)}

    def vocabularies(self, config: TrainConfig, family: ModelFamily) -> dict[str, list[str]]:
        return {VOCAB: list(RESERVED_TOKENS)}

    def vocabulary_text(self, name: str, config: TrainConfig, family: ModelFamily, train) -> list:
        return [target for _, target in train]

    def plan(self, run: RunDirectory, config: TrainConfig, family: ModelFamily, train) -> BatchPlan:
        targets = [target for _, target in train]
        sequences = tokenize_sentences(targets, run.tokenizer(), config.max_length)
        return BatchPlan(None, sequences, config.batch_size, seed=config.seed)

    def describe(self, plan: BatchPlan) -> str:
        return f"{plan.num_examples} training sentences"

    def build_model(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily
    ) -> keras.Model:
        return family.build(
            run.tokenizer().vocab_size,
            max_length=lm_positions(config),
            **config.model_hyperparameters(family),
        )

    def loss(self, labels, outputs, config: TrainConfig) -> tuple:
        loss = masked_cross_entropy(labels, outputs, label_smoothing=config.label_smoothing)
        return loss, masked_token_accuracy(labels, outputs)

    def evaluate(self, run, config, family, model, data) -> dict:
        from keras_attn.training.evaluation import evaluate_perplexity

        targets = [target for _, target in data["dev"][: config.eval_sentences]]
        sequences = tokenize_sentences(targets, run.tokenizer(), config.max_length)
        scores = evaluate_perplexity(model, sequences)
        return {
            "dev_perplexity": round(scores["perplexity"], 3),
            "dev_tokens": scores["tokens"],
            "dev_sentences": scores["sentences"],
        }

    def summary(self, metrics: dict) -> str:
        return f"dev perplexity {metrics['dev_perplexity']:.2f}"
