"""The training run behind `keras-attn train`: run directory, resumable loop, final evaluation."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import keras
import tensorflow as tf

from keras_attn.models.registry import get_family
from keras_attn.text import corpora
from keras_attn.text.normalization import normalize_text
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import build_wordpiece_vocab, load_vocab, save_vocab
from keras_attn.training import precision
from keras_attn.training.data import BatchPlan, tokenize_pairs, tokenize_sentences
from keras_attn.training.metrics import masked_cross_entropy, masked_token_accuracy
from keras_attn.training.schedules import SCHEDULES, InverseSqrtSchedule, warmup_cosine_schedule

CONFIG_FILE = "config.json"
MODEL_FILE = "model.keras"
METRICS_FILE = "metrics.json"
SOURCE_VOCAB = "source_vocab.txt"
TARGET_VOCAB = "target_vocab.txt"
VOCAB = "vocab.txt"  # the one vocabulary of a language-model run
CHECKPOINTS = "checkpoints"
LOGS = "logs"


@dataclass
class TrainConfig:
    """Everything that defines a run; saved as `config.json` in the run directory."""

    model: str = "rnn-attention"
    corpus: str = "synthetic"
    steps: int = 2000
    batch_size: int = 64
    learning_rate: float = 3e-3
    warmup_steps: int = 100
    schedule: str = "cosine"
    clipnorm: float = 5.0
    label_smoothing: float = 0.0
    mixed_precision: str = "auto"
    seed: int = 0
    max_length: int = 80
    vocab_size: int = 2000
    embedding_dim: int = 128
    units: int = 256
    cell: str = "lstm"
    dropout: float = 0.1
    # Attention hyperparameters; None leaves the family builder's default.
    score: str | None = None
    distribution: str | None = None
    attention: str | None = None
    window: int | None = None
    input_feeding: bool | None = None
    # Transformer hyperparameters; None leaves the family builder's default.
    num_layers: int | None = None
    d_model: int | None = None
    num_heads: int | None = None
    ff_dim: int | None = None
    normalize_first: bool | None = None
    checkpoint_every: int = 200
    eval_sentences: int = 1000

    def validate(self) -> None:
        family = get_family(self.model)
        for name in _FAMILY_OPTIONS:
            if getattr(self, name) is not None and name not in family.hyperparameters:
                raise ValueError(
                    f"--{name.replace('_', '-')} does not apply to --model {self.model} "
                    f"(its options: {', '.join(family.hyperparameters)})"
                )
        for name in ("window", "num_layers", "d_model", "num_heads", "ff_dim"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ValueError(
                    f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}"
                )
        precision.resolve_policy(self.mixed_precision)
        for name in ("steps", "batch_size", "max_length", "vocab_size", "checkpoint_every"):
            if getattr(self, name) <= 0:
                raise ValueError(
                    f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}"
                )
        if self.clipnorm < 0:
            raise ValueError(f"--clipnorm must be >= 0 (0 disables clipping), got {self.clipnorm}")
        if self.learning_rate <= 0:
            raise ValueError(f"--learning-rate must be positive, got {self.learning_rate}")
        if self.schedule not in SCHEDULES:
            choices = ", ".join(SCHEDULES)
            raise ValueError(f"--schedule must be one of {choices}, got {self.schedule}")
        if self.warmup_steps < 0 or (self.schedule == "inverse-sqrt" and self.warmup_steps < 1):
            least = 1 if self.schedule == "inverse-sqrt" else 0
            raise ValueError(
                f"--warmup-steps must be >= {least} with --schedule {self.schedule}, "
                f"got {self.warmup_steps}"
            )
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"--label-smoothing must be in [0, 1), got {self.label_smoothing}")
        family.check(self.model_hyperparameters())

    def model_hyperparameters(self) -> dict:
        """The family builder's keyword arguments; fields left at None are not passed."""
        values = {name: getattr(self, name) for name in get_family(self.model).hyperparameters}
        return {name: value for name, value in values.items() if value is not None}


# TrainConfig fields that only some model families take.
_FAMILY_OPTIONS = (
    "score",
    "distribution",
    "attention",
    "window",
    "input_feeding",
    "num_layers",
    "d_model",
    "num_heads",
    "ff_dim",
    "normalize_first",
)


class RunDirectory:
    """Paths of a run directory and the files that make it resumable and exportable."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def file(self, name: str) -> Path:
        return self.path / name

    def exists(self) -> bool:
        return self.file(CONFIG_FILE).exists()

    def write_json(self, name: str, data: dict) -> None:
        """Write atomically: a crash never leaves a half-written file behind."""
        target = self.file(name)
        temporary = target.with_suffix(target.suffix + ".tmp")
        temporary.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        os.replace(temporary, target)

    def read_config(self) -> TrainConfig:
        data = json.loads(self.file(CONFIG_FILE).read_text())
        known = {f.name for f in dataclasses.fields(TrainConfig)}
        return TrainConfig(**{k: v for k, v in data.items() if k in known})

    def tokenizer(self) -> WordPieceTokenizer:
        """The one tokenizer of a language-model run."""
        return WordPieceTokenizer(load_vocab(self.file(VOCAB)))

    def tokenizers(self) -> tuple[WordPieceTokenizer, WordPieceTokenizer]:
        """The source and target tokenizers of a translator run."""
        return (
            WordPieceTokenizer(load_vocab(self.file(SOURCE_VOCAB))),
            WordPieceTokenizer(load_vocab(self.file(TARGET_VOCAB))),
        )

    def load_model(self) -> keras.Model:
        import keras_attn  # noqa: F401  (registers the layers for deserialization)

        return keras.saving.load_model(self.file(MODEL_FILE), compile=False)


def _resolve_config(run: RunDirectory, config: TrainConfig, resume: bool) -> TrainConfig:
    """The run's config: the saved one (with the new step target) when resuming. Writes nothing."""
    if resume:
        if not run.exists():
            raise FileNotFoundError(f"cannot resume: {run.path} holds no {CONFIG_FILE}")
        saved = run.read_config()
        saved.steps = config.steps
        return saved
    if run.path.exists() and any(run.path.iterdir()):
        raise FileExistsError(
            f"{run.path} already holds a run; pass --resume to continue it or choose another --out"
        )
    return config


def _vocabularies(run: RunDirectory, config: TrainConfig, train_pairs, log) -> None:
    """Build the missing vocabularies: source + target, or one target-side `vocab.txt` for an LM."""
    sides = (
        ((VOCAB, 1),)
        if get_family(config.model).language_model
        else ((SOURCE_VOCAB, 0), (TARGET_VOCAB, 1))
    )
    for name, side in sides:
        if not run.file(name).exists():
            started = time.perf_counter()
            vocab = build_wordpiece_vocab([pair[side] for pair in train_pairs], config.vocab_size)
            save_vocab(run.file(name), vocab)
            log(f"built {name}: {len(vocab)} tokens in {time.perf_counter() - started:.1f}s")


def lm_positions(config: TrainConfig) -> int:
    """Learned positions of a language-model run's model.

    A training sequence is START + at most `max_length` tokens (END is only a label); the export
    keeps prompts of up to `max_length` tokens after START and generates up to
    `MAX_OUTPUT_LENGTH` tokens, so the model gets `max_length + 1 + MAX_OUTPUT_LENGTH` positions
    (those past `max_length + 1` are only reached by continuations longer than any training
    sentence).
    """
    from keras_attn.export.translator import MAX_OUTPUT_LENGTH

    return config.max_length + 1 + MAX_OUTPUT_LENGTH


def _training_data(run: RunDirectory, config: TrainConfig, train_pairs) -> BatchPlan:
    """The batch plan: `(source, target)` pairs for a translator, target sentences for an LM."""
    if get_family(config.model).language_model:
        targets = [target for _, target in train_pairs]
        sequences = tokenize_sentences(targets, run.tokenizer(), config.max_length)
        return BatchPlan(None, sequences, config.batch_size, seed=config.seed)
    source_tokenizer, target_tokenizer = run.tokenizers()
    sources, targets = tokenize_pairs(
        train_pairs, source_tokenizer, target_tokenizer, config.max_length
    )
    return BatchPlan(sources, targets, config.batch_size, seed=config.seed)


def _build_model(run: RunDirectory, config: TrainConfig) -> keras.Model:
    family = get_family(config.model)
    if family.language_model:
        return family.build(
            run.tokenizer().vocab_size,
            max_length=lm_positions(config),
            **config.model_hyperparameters(),
        )
    source_tokenizer, target_tokenizer = run.tokenizers()
    return family.build(
        source_tokenizer.vocab_size, target_tokenizer.vocab_size, **config.model_hyperparameters()
    )


def _evaluate(run: RunDirectory, config: TrainConfig, model: keras.Model, dev_pairs) -> dict:
    """Dev metrics: BLEU + exact match of the exported translation path, or LM perplexity."""
    from keras_attn.export.translator import MAX_OUTPUT_LENGTH, Translator
    from keras_attn.training.evaluation import evaluate_pairs, evaluate_perplexity

    family = get_family(config.model)
    if family.language_model:
        targets = [target for _, target in dev_pairs]
        sequences = tokenize_sentences(targets, run.tokenizer(), config.max_length)
        scores = evaluate_perplexity(model, sequences)
        return {
            "dev_perplexity": round(scores["perplexity"], 3),
            "dev_tokens": scores["tokens"],
            "dev_sentences": scores["sentences"],
        }
    source_tokenizer, target_tokenizer = run.tokenizers()
    translator = Translator(
        model,
        family.decoding_steps(model, MAX_OUTPUT_LENGTH),
        source_tokenizer,
        target_tokenizer,
        config.max_length,
        max_output_length=MAX_OUTPUT_LENGTH,
    )
    scores = evaluate_pairs(translator, dev_pairs, normalize_text)
    return {
        "dev_bleu": round(scores["bleu"], 2),
        "dev_exact_match": round(scores["exact_match"], 4),
        "dev_sentences": scores["sentences"],
    }


def learning_rate_schedule(config: TrainConfig) -> keras.optimizers.schedules.LearningRateSchedule:
    """The schedule named by `config.schedule`, peaking at `config.learning_rate`.

    `cosine`: linear warm-up over `warmup_steps`, then cosine decay to 5 % of the peak at step
    `steps`. `inverse-sqrt`: Vaswani et al.'s `d_model^-0.5 · min(n^-0.5, n · warmup^-1.5)`,
    scaled so that its peak (at step `warmup_steps`) is `learning_rate`; it does not depend on
    `steps`. Both are functions of the step counter only, so a resumed run follows them exactly.
    """
    if config.schedule == "inverse-sqrt":
        return InverseSqrtSchedule.from_peak(config.learning_rate, config.warmup_steps)
    return warmup_cosine_schedule(config.learning_rate, config.warmup_steps, config.steps)


def build_optimizer(config: TrainConfig, policy: str) -> keras.optimizers.Optimizer:
    """Adam on `learning_rate_schedule(config)`, the gradient clipped to norm `config.clipnorm`.

    When the norm of the whole gradient (all variables together) exceeds `clipnorm`,
    `g <- clipnorm / ||g|| * g` (the RNN slides' Algorithm 1; Pascanu et al., 2013,
    arXiv:1211.5063); 0 disables clipping. This is Keras' `global_clipnorm`: its per-variable
    `clipnorm` would change the direction of `g`. Under `mixed_float16` the optimizer is wrapped
    in a `LossScaleOptimizer`, which unscales the gradient before the inner optimizer clips it.
    """
    optimizer = keras.optimizers.Adam(
        learning_rate_schedule(config), global_clipnorm=config.clipnorm or None
    )
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def train(
    out: str | os.PathLike,
    config: TrainConfig,
    resume: bool = False,
    log: Callable[[str], None] = print,
    progress: bool = True,
) -> dict:
    """Train (or continue) a run in directory `out`; returns the final metrics.

    Writes `config.json`, the two vocabularies (one, `vocab.txt`, for a language model),
    `checkpoints/` (model, optimizer and step every `checkpoint_every` steps, the last three
    kept), `logs/` (TensorBoard), `model.keras` and `metrics.json` (dev BLEU and exact match; dev
    perplexity for a language model, which trains on the corpus' target-side sentences). With
    `resume=True` the loop restarts from the last checkpoint: weights, optimizer state, step
    counter and data position (the batch plan is a function of the step) are all restored, and
    `config.steps` may extend the run.
    """
    config.validate()
    run = RunDirectory(out)
    config = _resolve_config(run, config, resume)
    # Load the corpus before any write: a bad name leaves no half-made run directory behind.
    splits = corpora.load_corpus(config.corpus, seed=config.seed)
    run.path.mkdir(parents=True, exist_ok=True)
    policy = precision.set_policy(config.mixed_precision)
    keras.utils.set_random_seed(config.seed)
    run.write_json(CONFIG_FILE, dataclasses.asdict(config))

    _vocabularies(run, config, splits["train"], log)
    plan = _training_data(run, config, splits["train"])
    log(
        f"corpus {config.corpus}: {len(plan.targets)} training "
        f"{'sentences' if plan.sources is None else 'pairs'}, {plan.batches_per_epoch} "
        f"batches per pass; precision {policy}"
    )

    model = _build_model(run, config)
    model(plan.batch(0)[0])  # build every variable before checkpoint restore
    optimizer = build_optimizer(config, policy)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    manager = tf.train.CheckpointManager(checkpoint, str(run.file(CHECKPOINTS)), max_to_keep=3)
    if resume and manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        log(f"resumed from {manager.latest_checkpoint} at step {int(step.numpy())}")

    ids = tf.TensorSpec((None, None), tf.int32)

    @tf.function(input_signature=[plan.feature_spec, ids])
    def train_step(features, labels):
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            loss = masked_cross_entropy(labels, logits, label_smoothing=config.label_smoothing)
            scaled = optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply(gradients, model.trainable_variables)
        return loss, masked_token_accuracy(labels, logits)

    start = int(step.numpy())
    writer = tf.summary.create_file_writer(str(run.file(LOGS)))
    bar = None
    if progress:  # a live bar on a terminal; a line every 10 s in a log file
        interval = 0.05 if sys.stdout.isatty() else 10.0
        bar = keras.utils.Progbar(
            config.steps, stateful_metrics=["loss", "accuracy"], interval=interval
        )
    started = time.perf_counter()
    loss = accuracy = float("nan")
    for features, labels in plan.dataset(start, config.steps):
        loss_t, accuracy_t = train_step(features, labels)
        step.assign_add(1)
        current = int(step.numpy())
        loss, accuracy = float(loss_t), float(accuracy_t)
        if bar is not None:
            bar.update(current, [("loss", loss), ("accuracy", accuracy)])
        if current % 50 == 0 or current == config.steps:
            with writer.as_default(step=current):
                tf.summary.scalar("loss", loss)
                tf.summary.scalar("token_accuracy", accuracy)
        if current % config.checkpoint_every == 0 or current == config.steps:
            manager.save(checkpoint_number=current)
    elapsed = time.perf_counter() - started
    writer.flush()

    temporary = run.file(MODEL_FILE + ".tmp.keras")
    model.save(temporary)
    os.replace(temporary, run.file(MODEL_FILE))

    metrics = {
        "steps": int(step.numpy()),
        "steps_this_session": int(step.numpy()) - start,
        "train_seconds_this_session": round(elapsed, 1),
        "final_loss": loss,
        "final_token_accuracy": accuracy,
        "precision": policy,
        **_evaluate(run, config, model, splits["dev"][: config.eval_sentences]),
    }
    run.write_json(METRICS_FILE, metrics)
    if "dev_perplexity" in metrics:
        quality = f"dev perplexity {metrics['dev_perplexity']:.2f}"
    else:
        quality = (
            f"dev BLEU {metrics['dev_bleu']:.2f}, exact match {metrics['dev_exact_match']:.1%}"
        )
    log(f"{quality} on {metrics['dev_sentences']} sentences ({metrics['steps']} steps)")
    return metrics
