"""Pre-training tasks: BERT's masked LM + next-sentence prediction, and (m)BART's denoising.

Both read monolingual documents of one or more corpora (`keras_attn.text.corpora.
load_monolingual`): `--corpus` may name several, comma-separated, and `--side` picks the
source side, the target side (the default) or both. Dev and test sentences of the parallel
corpora are never part of the pre-training text.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from keras_attn.errors import ConfigError
from keras_attn.formats import VOCAB, RunDirectory
from keras_attn.models.families import ModelFamily
from keras_attn.text import corpora, noising
from keras_attn.text.denoising import BartTokens, bart_reserved_tokens, denoising_example
from keras_attn.text.masked_lm import (
    BERT_RESERVED_TOKENS,
    BertTokens,
    mask_tokens,
    next_sentence_pairs,
    pack_segments,
)
from keras_attn.training.config import TrainConfig
from keras_attn.training.data import ExamplePlan, pad
from keras_attn.training.metrics import masked_cross_entropy, masked_token_accuracy
from keras_attn.training.tasks.base import Task

# The longest sequence the pre-training models' learned positions hold (the builders' default).
MAX_POSITIONS = 512
DEFAULT_MLM_RATE = 0.15
DEFAULT_BART_MASK_RATE = 0.3
DEFAULT_NOISES = ("text_infilling", "sentence_permutation")


def corpus_names(config: TrainConfig) -> list[str]:
    """The corpora of a pre-training run: `--corpus` split at commas."""
    return [name.strip() for name in config.corpus.split(",") if name.strip()]


def pretraining_sides(config: TrainConfig) -> list[str]:
    side = config.side or "target"
    return ["source", "target"] if side == "both" else [side]


def load_pretraining_text(config: TrainConfig) -> dict:
    """`{"train", "dev": [(language code, document), ...]}` of the run's corpora and sides."""
    names = corpus_names(config)
    if not names:
        raise ConfigError(f"corpus names no corpus: {config.corpus!r}", ["corpus"])
    if config.max_length > MAX_POSITIONS:
        raise ConfigError(
            f"max_length={config.max_length} exceeds the model's {MAX_POSITIONS} positions",
            ["max_length"],
        )
    text = corpora.load_monolingual(names, pretraining_sides(config), seed=config.seed)
    if config.train_examples is not None:
        text["train"] = text["train"][: config.train_examples]
    return text


def is_ordered(config: TrainConfig) -> bool:
    """Whether any corpus of the run has documents of several sentences in order."""
    return any(corpora.is_ordered(name) for name in corpus_names(config))


def dev_sample(examples: list, config: TrainConfig) -> list:
    """At most `config.eval_sentences` of the dev examples, drawn evenly from all the corpora's
    documents (a seeded draw in corpus order), not the first documents of the first corpus."""
    if len(examples) <= config.eval_sentences:
        return examples
    rng = np.random.default_rng(config.seed)
    chosen = np.sort(rng.choice(len(examples), config.eval_sentences, replace=False))
    return [examples[i] for i in chosen]


def _sentences(documents) -> list[str]:
    return [sentence for _, document in documents for sentence in document]


def _tokenize_documents(tokenizer, documents) -> list[tuple[str, list[np.ndarray]]]:
    """Each document's sentences as id arrays (sentences with no token dropped)."""
    flat = _sentences(documents)
    ids = []
    for begin in range(0, len(flat), 4096):
        ragged = tokenizer.tokenize(tf.constant(flat[begin : begin + 4096]))
        ids.extend(np.asarray(row, np.int32) for row in ragged.to_list())
    result, position = [], 0
    for code, document in documents:
        sentences = [s for s in ids[position : position + len(document)] if len(s)]
        position += len(document)
        if sentences:
            result.append((code, sentences))
    return result


class _PreTrainingTask(Task):
    """What the two pre-training objectives share: monolingual text (`load_pretraining_text`),
    one vocabulary learnt from its sentences, and a model built from that vocabulary's size."""

    def load_data(self, config: TrainConfig, family: ModelFamily) -> dict:
        return load_pretraining_text(config)

    def vocabulary_text(self, name: str, config: TrainConfig, family: ModelFamily, train) -> list:
        return _sentences(train)

    def build_model(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily
    ) -> keras.Model:
        return family.build(run.tokenizer().vocab_size, **config.model_hyperparameters(family))


class MaskedLanguageModelTask(_PreTrainingTask):
    """BERT pre-training: masked LM on `[CLS] A [SEP] B [SEP]` pairs plus next-sentence
    prediction (Devlin et al., 2018, arXiv:1810.04805, section 3.1).

    Examples are next-sentence pairs (`keras_attn.text.masked_lm.next_sentence_pairs`) of
    consecutive sentences of a document (label 1) or of a sentence and a random sentence of
    another document (label 0), drawn once with the run's seed; a corpus with no sentence order
    gives single-sentence examples whose NSP loss is skipped. Each batch is masked when it is
    drawn, with the stateless seed `(seed, step)`, so every pass masks other tokens and a
    resumed run masks as the uninterrupted one would. `mask_rate` (0.15) of the tokens are
    predicted: 80 % shown as `[MASK]`, 10 % as a random token, 10 % unchanged.

    Loss: the masked positions' mean cross-entropy plus the NSP cross-entropy. Dev metrics:
    masked-token accuracy and perplexity (`exp` of the mean masked cross-entropy) and NSP
    accuracy, on the dev documents masked with a fixed seed.
    """

    def vocabularies(self, config: TrainConfig, family: ModelFamily) -> dict[str, list[str]]:
        return {VOCAB: list(BERT_RESERVED_TOKENS)}

    def _examples(self, run: RunDirectory, config: TrainConfig, documents, seed: int):
        """`(token_ids, segment_ids, nsp_label)` examples of `documents`: next-sentence pairs
        of the documents of several sentences, single-sentence examples (NSP label -1) of the
        others."""
        tokens = BertTokens.from_vocab(run.tokenizer().vocab)
        tokenized = [sentences for _, sentences in _tokenize_documents(run.tokenizer(), documents)]
        several = [d for d in tokenized if len(d) > 1] if is_ordered(config) else []
        if len(several) < 2:  # random "next" sentences need another document
            several = []
        single = [d for d in tokenized if len(d) == 1] if several else tokenized
        pairs = list(next_sentence_pairs(several, seed=seed, ordered=True)) if several else []
        if single:
            pairs.extend(next_sentence_pairs(single, seed=seed, ordered=False))
        examples = []
        for first, second, label in pairs:
            ids, segments = pack_segments(
                first,
                second,
                cls_id=tokens.cls_id,
                sep_id=tokens.sep_id,
                max_length=config.max_length,
            )
            examples.append((ids, segments, label))
        return tokens, examples

    def _batch(self, tokens: BertTokens, examples, indices, seed, rate):
        chosen = [examples[i] for i in indices]
        ids = pad([e[0] for e in chosen])
        segments = pad([e[1] for e in chosen])
        inputs, labels = mask_tokens(
            ids,
            vocab_size=tokens.vocab_size,
            mask_id=tokens.mask_id,
            special_ids=tokens.special_ids,
            seed=seed,
            rate=rate,
        )
        features = {"token_ids": inputs.numpy(), "segment_ids": segments}
        nsp = np.asarray([e[2] for e in chosen], np.int32)
        return features, {"mlm": labels.numpy(), "nsp": nsp}

    def plan(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily, train
    ) -> ExamplePlan:
        tokens, examples = self._examples(run, config, train, config.seed)
        rate = config.mask_rate or DEFAULT_MLM_RATE
        ids = tf.TensorSpec((None, None), tf.int32)
        return ExamplePlan(
            [len(e[0]) for e in examples],
            config.batch_size,
            lambda indices, step: self._batch(tokens, examples, indices, (config.seed, step), rate),
            feature_spec={"token_ids": ids, "segment_ids": ids},
            label_spec={"mlm": ids, "nsp": tf.TensorSpec((None,), tf.int32)},
            count_labels=lambda labels: tf.reduce_sum(tf.cast(labels["mlm"] != 0, tf.float32)),
            seed=config.seed,
        )

    def describe(self, plan: ExamplePlan) -> str:
        return f"{plan.num_examples} training examples (sentence pairs or single sentences)"

    def loss(self, labels, outputs, config: TrainConfig) -> tuple:
        mlm = masked_cross_entropy(labels["mlm"], outputs["mlm_logits"])
        return mlm + _nsp_loss(labels["nsp"], outputs["nsp_logits"]), masked_token_accuracy(
            labels["mlm"], outputs["mlm_logits"]
        )

    def evaluate(self, run, config, family, model, data) -> dict:
        tokens, examples = self._examples(run, config, data["dev"], config.seed + 1)
        examples = dev_sample(examples, config)
        if not examples:
            return {"dev_sentences": 0}
        rate = config.mask_rate or DEFAULT_MLM_RATE
        total = correct = count = nsp_correct = nsp_count = 0.0
        for begin in range(0, len(examples), 128):
            indices = range(begin, min(begin + 128, len(examples)))
            features, labels = self._batch(
                tokens, examples, indices, (config.seed, -1 - begin), rate
            )
            outputs = model(features, training=False)
            logits = tf.cast(outputs["mlm_logits"], tf.float32).numpy()
            real = labels["mlm"] != 0
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels["mlm"], logits).numpy()
            total += float(losses[real].astype(np.float64).sum())
            correct += float((logits.argmax(-1) == labels["mlm"])[real].sum())
            count += float(real.sum())
            has_nsp = labels["nsp"] >= 0
            nsp_guess = np.asarray(outputs["nsp_logits"]).argmax(-1)
            nsp_correct += float((nsp_guess == labels["nsp"])[has_nsp].sum())
            nsp_count += float(has_nsp.sum())
        metrics = {
            "dev_mlm_accuracy": round(correct / count, 4),
            "dev_mlm_perplexity": round(math.exp(total / count), 3),
            "dev_masked_tokens": int(count),
            "dev_sentences": len(examples),
        }
        if nsp_count:
            metrics["dev_nsp_accuracy"] = round(nsp_correct / nsp_count, 4)
        return metrics

    def summary(self, metrics: dict) -> str:
        nsp = metrics.get("dev_nsp_accuracy")
        return (
            f"dev masked-LM accuracy {metrics['dev_mlm_accuracy']:.1%}, perplexity "
            f"{metrics['dev_mlm_perplexity']:.2f}" + ("" if nsp is None else f", NSP {nsp:.1%}")
        )


def _nsp_loss(labels, logits):
    """Mean NSP cross-entropy over the examples with a label (>= 0); 0 when none has one."""
    has_label = tf.cast(labels >= 0, tf.float32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.maximum(labels, 0), logits=tf.cast(logits, tf.float32)
    )
    return tf.math.divide_no_nan(tf.reduce_sum(losses * has_label), tf.reduce_sum(has_label))


def _chunks(sentences: list[np.ndarray], budget: int) -> list[list[np.ndarray]]:
    """Consecutive runs of a document's sentences whose tokens, one delimiter per sentence
    included, fit `budget`; a longer sentence is a chunk of its own (the example cuts it)."""
    chunks, current, used = [], [], 0
    for sentence in sentences:
        size = len(sentence) + 1
        if current and used + size > budget:
            chunks.append(current)
            current, used = [], 0
        current.append(sentence)
        used += size
    if current:
        chunks.append(current)
    return chunks


class DenoisingTask(_PreTrainingTask):
    """(m)BART pre-training: rebuild a document from its noised version (Lewis et al., 2019,
    arXiv:1910.13461; Liu et al., 2020, arXiv:2001.08210).

    Documents are cut into chunks of consecutive sentences that fit `max_length`; each example
    is `keras_attn.text.denoising.denoising_example` of a chunk, noised when its batch is drawn
    with the stateless seed `(seed, step · batch_size + row)`: every pass sees other noise, and
    a resumed run the noise the uninterrupted one would have seen. With `side="both"` the run
    is multilingual (mBART): the vocabulary holds one language tag per language and every
    source ends with `[END]` and its document's tag. `noises` (default text infilling with
    `mask_rate` 0.3 of the tokens, λ = 3, after sentence permutation) picks the noising
    functions of `keras_attn.text.noising.denoise`.

    Loss: the target tokens' mean cross-entropy (teacher forcing). Dev metrics: the
    reconstruction's token accuracy and perplexity on the dev documents, noised with a fixed
    seed.
    """

    def load_data(self, config: TrainConfig, family: ModelFamily) -> dict:
        try:
            noising.check_noise_options(
                _noises(config), config.mask_rate or DEFAULT_BART_MASK_RATE, 3.0, 0.3
            )
        except ValueError as error:
            raise ConfigError(str(error), ["noises"]) from error
        return super().load_data(config, family)

    def languages(self, config: TrainConfig) -> list[str]:
        """The language tags of a multilingual (`side="both"`) run's vocabulary."""
        if (config.side or "target") != "both":
            return []
        codes = set()
        for name in corpus_names(config):
            codes.update(corpora.language_codes(name))
        return sorted(codes)

    def vocabularies(self, config: TrainConfig, family: ModelFamily) -> dict[str, list[str]]:
        return {VOCAB: bart_reserved_tokens(self.languages(config))}

    def _examples(self, run: RunDirectory, config: TrainConfig, documents) -> list:
        """`(language id or None, chunk)` examples of `documents`."""
        tokens = BartTokens.from_vocab(run.tokenizer().vocab)
        multilingual = bool(self.languages(config))
        examples = []
        for code, sentences in _tokenize_documents(run.tokenizer(), documents):
            language = tokens.language_ids[code] if multilingual else None
            budget = config.max_length - 2
            examples.extend((language, chunk) for chunk in _chunks(sentences, budget))
        return examples

    def _batch(self, run_tokens: BartTokens, config: TrainConfig, chosen, seeds):
        sources, targets = [], []
        for (language, chunk), seed in zip(chosen, seeds, strict=True):
            source, target = denoising_example(
                chunk,
                seed=seed,
                start_id=run_tokens.start_id,
                end_id=run_tokens.end_id,
                mask_id=run_tokens.mask_id,
                sentence_end_id=run_tokens.sentence_end_id,
                language_id=language,
                max_length=config.max_length,
                noises=_noises(config),
                mask_ratio=config.mask_rate or DEFAULT_BART_MASK_RATE,
            )
            sources.append(source)
            targets.append(target)
        targets = pad(targets)
        return {"source_ids": pad(sources), "target_ids": targets[:, :-1]}, targets[:, 1:]

    def plan(
        self, run: RunDirectory, config: TrainConfig, family: ModelFamily, train
    ) -> ExamplePlan:
        tokens = BartTokens.from_vocab(run.tokenizer().vocab)
        examples = self._examples(run, config, train)
        size = config.batch_size

        def collate(indices, step):
            seeds = [(config.seed, step * size + row) for row in range(len(indices))]
            return self._batch(tokens, config, [examples[i] for i in indices], seeds)

        ids = tf.TensorSpec((None, None), tf.int32)
        return ExamplePlan(
            [sum(len(s) + 1 for s in chunk) for _, chunk in examples],
            size,
            collate,
            feature_spec={"source_ids": ids, "target_ids": ids},
            seed=config.seed,
        )

    def describe(self, plan: ExamplePlan) -> str:
        return f"{plan.num_examples} training passages"

    def loss(self, labels, outputs, config: TrainConfig) -> tuple:
        loss = masked_cross_entropy(labels, outputs, label_smoothing=config.label_smoothing)
        return loss, masked_token_accuracy(labels, outputs)

    def evaluate(self, run, config, family, model, data) -> dict:
        tokens = BartTokens.from_vocab(run.tokenizer().vocab)
        examples = dev_sample(self._examples(run, config, data["dev"]), config)
        if not examples:
            return {"dev_sentences": 0}
        total = correct = count = 0.0
        for begin in range(0, len(examples), 128):
            chosen = examples[begin : begin + 128]
            seeds = [(config.seed + 1, begin + row) for row in range(len(chosen))]
            features, labels = self._batch(tokens, config, chosen, seeds)
            logits = tf.cast(model(features, training=False), tf.float32).numpy()
            real = labels != 0
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits).numpy()
            total += float(losses[real].astype(np.float64).sum())
            correct += float((logits.argmax(-1) == labels)[real].sum())
            count += float(real.sum())
        return {
            "dev_token_accuracy": round(correct / count, 4),
            "dev_perplexity": round(math.exp(total / count), 3),
            "dev_tokens": int(count),
            "dev_sentences": len(examples),
        }

    def summary(self, metrics: dict) -> str:
        return (
            f"dev reconstruction accuracy {metrics['dev_token_accuracy']:.1%}, perplexity "
            f"{metrics['dev_perplexity']:.2f}"
        )


def _noises(config: TrainConfig) -> tuple[str, ...]:
    if config.noises is None:
        return DEFAULT_NOISES
    return tuple(name.strip() for name in config.noises.split(",") if name.strip())
