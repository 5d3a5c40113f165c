"""The training run behind `keras-attn train`: a resumable loop over named steps.

`train` resolves the run's config and model family once, then runs these steps in order:
`_start_run` (config, corpus, vocabularies on disk), `_training_data` (the batch plan),
`_build_or_restore` (model, optimizer, checkpoint), `_fit` (the training loop) and `_finish`
(`model.keras`, dev evaluation, `metrics.json`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import keras
import tensorflow as tf

from keras_attn import formats
from keras_attn.errors import ConfigError
from keras_attn.formats import (  # noqa: F401  (re-exported: the run directory's file names)
    CHECKPOINTS,
    CONFIG_FILE,
    INIT_REPORT,
    LOGS,
    MAX_OUTPUT_LENGTH,
    METRICS_FILE,
    MODEL_FILE,
    MODEL_SOURCE,
    SOURCE_VOCAB,
    TARGET_VOCAB,
    TRAIN_LOG,
    VOCAB,
)
from keras_attn.models.families import ModelFamily, load_model_file
from keras_attn.training import paths, precision
from keras_attn.training import strategy as strategies
from keras_attn.training.checkpoints import restore_newest
from keras_attn.training.config import (
    TrainConfig,
    resumed_config,
    with_family_tuning,
)
from keras_attn.training.data import BatchOrder
from keras_attn.training.initialization import (
    check_origin_run,
    initialize_from,
    resolve_init_config,
)
from keras_attn.training.optimizers import OPTIMIZERS
from keras_attn.training.schedules import (
    HalvingSchedule,
    InverseSqrtSchedule,
    warmup_cosine_schedule,
)
from keras_attn.training.tasks import get_task
from keras_attn.training.tasks.language_model import lm_positions  # noqa: F401  (re-exported)
from keras_attn.training.watch import DevWatcher

# Steps in a row that the loss scaler (mixed_float16) may skip for a non-finite loss before the
# run counts as diverged: an overflow of one batch is skipped, one that persists is not.
MAX_SKIPPED_STEPS = 20


class TrainingDiverged(RuntimeError):
    """The loss or the weights stopped being finite; nothing was saved from that state."""


class RunDirectory(formats.RunDirectory):
    """A run directory (`keras_attn.formats.RunDirectory`) whose config reads as a `TrainConfig`."""

    def read_config(self) -> TrainConfig:
        return TrainConfig.from_fields(self.read_config_fields())


def train(
    out: str | os.PathLike,
    config: TrainConfig | None = None,
    resume: bool = False,
    log: Callable[[str], None] = print,
    progress: bool = True,
    distribute: str = "none",
) -> dict:
    """Train (or continue) a run in directory `out`; returns the final metrics.

    Writes `config.json`, the vocabularies (source and target for a translator, one `vocab.txt`
    for a language model or a pre-training run),
    `checkpoints/` (model, optimizer and step every `checkpoint_every` steps, the last three
    kept), `train_log.tsv` (loss and token accuracy of every step), `logs/` (TensorBoard),
    `model.keras` and `metrics.json` (the family's task's dev metrics: BLEU and exact match for a
    translator, perplexity for a language model, masked-LM and reconstruction scores for
    pre-training, accuracy for a classifier; `eval_sentences=0` skips them). A run whose
    `config.model_file` defines its family keeps a copy of that file as `model_file.py`, which
    a resumed run and `keras-attn export` import, and records the family's options, defaults
    filled in, as `options`. What differs between
    families (data, vocabularies, model, loss, evaluation) is their task's
    (`keras_attn.training.tasks`); with `config.init_from` a new run starts from a finished
    run's weights and vocabularies, with `config.vocab_from` from another run's vocabularies
    only (`keras_attn.training.initialization`, which refuses a run this one cannot start from
    before anything is written).

    With `resume=True` the loop restarts from the last checkpoint: weights, optimizer state,
    dropout seed states, step counter and data position (the batch plan is a function of the
    step) are all restored. The run continues with its saved `config.json`: `config=None` keeps
    it as it is (without its time limits); a `config` may change the fields of
    `keras_attn.training.config.RESUMABLE` (the step target, `checkpoint_every`,
    `eval_sentences` and the time limits), and any other field that differs from the saved one
    is a `ConfigError` (`resumed_config`). The config the run continues with is saved again.

    `config.mixed_precision` is set as Keras' global dtype policy while `train` runs; the policy
    found on entry is restored when it returns or raises. `auto` is resolved once, when the run
    starts (`keras_attn.training.precision.choose_policy`): the choice is logged and saved as
    `precision` in `config.json` and `metrics.json`, and a resumed run keeps it.

    With `config.max_minutes` the loop also stops at the first step that ends after that many
    minutes of this call's training loop (tracing included; vocabulary and model building and
    the final evaluation not), checkpointing that step. `config.max_cpu_minutes` does the same
    with this process' CPU time (every thread's, `time.process_time`), a budget that other jobs
    on a shared machine do not eat into. Workers could disagree on when the time is up, so
    either limit needs one worker (`none` or `mirrored`).

    Every file is written under a temporary name and moved into place (checkpoints by
    `tf.train.CheckpointManager`, which records a checkpoint only once it is complete), so a
    process killed at any moment (SIGKILL included) leaves a directory that `resume=True`
    continues, from step 0 when no checkpoint was recorded yet. A recorded checkpoint that does
    not restore (damaged or missing files) is skipped, with a `log` line, for the newest one
    that does (`checkpoints.restore_newest`); if none does, a `ConfigError`.

    A step whose loss is not finite, or weights that are not finite when a checkpoint is due,
    raise `TrainingDiverged` at once: the checkpoints before it are kept, and no checkpoint,
    `model.keras` or `metrics.json` is written from that state. Under `mixed_float16` the loss
    scaler skips a step with non-finite gradients (the weights stay as they were); only
    `MAX_SKIPPED_STEPS` such steps in a row count as divergence.

    `distribute` is `none`, `mirrored` or `multiworker` (see `keras_attn.training.strategy`);
    `config.batch_size` is the global batch. In a multi-worker run every worker passes the same
    `out` (a shared directory): the chief writes it, the other workers only read it and write
    their checkpoints and model to temporary directories they delete.

    Raises:
        keras_attn.errors.ConfigError: a config field, `out` or `distribute` that cannot be
            used, before anything is written (a model whose layers do not match the `init_from`
            run's is found only once it is built: the run directory this call made is removed).
        TrainingDiverged: see above.
    """
    if config is None and not resume:
        raise ConfigError("a new run needs a config (config=None resumes a run)", ["resume"])
    if config is not None:
        _check_request(config, distribute)
    strategy = strategies.make_strategy(distribute)  # first: it may configure collective ops
    chief = strategies.is_chief(strategy)
    run = RunDirectory(out)
    start = _start_run(run, config, resume, distribute, strategy, chief, log)
    config, family, policy = start.config, start.family, start.precision.policy
    with precision.dtype_policy(policy):
        plan = _training_data(run, config, start.splits["train"], family)
        log(
            f"corpus {config.corpus}: {get_task(family.task).describe(plan)}, "
            f"{plan.batches_per_epoch} batches per pass; precision {policy}; "
            f"{strategy.num_replicas_in_sync} replica(s) (--distribute {distribute})"
        )
        try:
            state = _build_or_restore(run, config, family, plan, policy, strategy, chief, log)
        except ConfigError:
            if start.made_directory:
                _remove_new_run(run, start.made_directory)
            raise
        watcher = None
        if chief and config.eval_every:
            watcher = DevWatcher(run, config, family, get_task(family.task), start.splits)
        try:
            metrics = _fit(
                run, config, family, plan, state, policy, strategy, chief, progress, log, watcher
            )
            if chief:
                _finish(run, config, family, state.model, start.splits, metrics, log, watcher)
            else:
                state.model.save(state.private / MODEL_FILE)  # as the chief does, then thrown away
            strategies.barrier(strategy)  # no worker leaves while the chief may still need it
            return metrics
        finally:
            if state.private is not None:
                shutil.rmtree(state.private, ignore_errors=True)
            if watcher is not None:
                watcher.close()


def _check_request(config: TrainConfig, distribute: str) -> ModelFamily:
    """Validate `config` for `distribute` before anything runs; returns its model family."""
    family = config.family()
    config.validate(family)
    for name in ("max_minutes", "max_cpu_minutes"):
        if getattr(config, name) is not None and distribute == "multiworker":
            raise ConfigError(
                f"{name} needs one worker, not distribute='multiworker' (workers would stop at "
                "different steps)",
                [name, "distribute"],
            )
    return family


# The key of `config.json` (besides the `TrainConfig` fields) that records the dtype policy the
# run trains under, `mixed_precision` resolved.
PRECISION_KEY = "precision"


@dataclass
class _Start:
    """A started run: its resolved config and family, data splits and dtype policy."""

    config: TrainConfig
    family: ModelFamily
    splits: dict
    precision: precision.PolicyChoice
    # "directory" when this call made the run directory, "contents" when it filled an empty
    # (or only temporary) one, "" otherwise: what to remove if the model cannot start.
    made_directory: str = ""


def _start_run(
    run: RunDirectory,
    config: TrainConfig | None,
    resume: bool,
    distribute: str,
    strategy,
    chief: bool,
    log,
) -> _Start:
    """The run's config, model family, corpus splits and dtype policy, with `config.json` and the
    vocabularies on disk.

    The chief resolves the config (`_resolve_config`) and the precision, loads the corpus before
    writing anything (so a bad corpus leaves no half-made run directory), then writes the config
    and builds the missing vocabularies; the other workers wait for it and read what it wrote.
    """
    if chief:
        try:
            existed = run.path.exists()
            saved = run.read_config_fields() if resume and run.exists() else {}
            if resume and run.file(MODEL_SOURCE).exists():
                load_model_file(run.file(MODEL_SOURCE))  # the run's copy of its model file
            config = _resolve_config(run, config, resume, log)
            family = _check_request(config, distribute)
            choice = _choose_precision(config, saved.get(PRECISION_KEY), log)
            strategies.check_global_batch(config.batch_size, strategy.num_replicas_in_sync)
            splits = _load_data(config, family)
            made = ""
            if not saved:
                made = "contents" if existed else "directory"
            run.path.mkdir(parents=True, exist_ok=True)
            if config.model_file and not run.file(MODEL_SOURCE).exists():
                run.write_text(MODEL_SOURCE, Path(config.model_file).read_text(encoding="utf-8"))
            run.write_json(
                CONFIG_FILE, {**dataclasses.asdict(config), PRECISION_KEY: choice.policy}
            )
            origin = config.init_from or config.vocab_from
            init_run = RunDirectory(origin) if origin else None
            task = get_task(family.task)
            task.prepare_run(run, config, family, splits, log, init_run)
        except BaseException:
            strategies.barrier(strategy, ok=False)  # the other workers stop too
            raise
    if not strategies.barrier(strategy) and not chief:
        raise ConfigError("the chief worker could not start the run; its output says why")
    if not chief:
        fields = run.read_config_fields()
        config = TrainConfig.from_fields(fields)
        family = run.family()
        choice = precision.PolicyChoice(fields[PRECISION_KEY], "the chief's choice")
        strategies.check_global_batch(config.batch_size, strategy.num_replicas_in_sync)
        splits = _load_data(config, family)
        made = ""
    return _Start(config, family, splits, choice, made)


def _choose_precision(config: TrainConfig, recorded: str | None, log) -> precision.PolicyChoice:
    """The dtype policy of the run: the one it started with when resumed with `auto`."""
    if config.mixed_precision == "auto" and recorded is not None:
        return precision.PolicyChoice(recorded, "the policy the run started with")
    choice = precision.resolve_policy(config.mixed_precision)
    if config.mixed_precision == "auto":
        log(f"mixed_precision auto: {choice.policy} ({choice.reason})")
    return choice


def _remove_new_run(run: RunDirectory, made: str) -> None:
    """Remove what a run that could not start wrote: its directory, or the contents of the
    empty one it was given."""
    if made == "directory":
        shutil.rmtree(run.path, ignore_errors=True)
        return
    for path in run.path.iterdir():
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _load_data(config: TrainConfig, family: ModelFamily) -> dict:
    """The task's data splits for `config.corpus`; its errors become a ConfigError (`corpus`)."""
    try:
        return get_task(family.task).load_data(config, family)
    except ConfigError:
        raise
    except (ValueError, FileNotFoundError) as error:
        raise ConfigError(str(error), ["corpus"]) from error


def _resolve_config(
    run: RunDirectory, config: TrainConfig | None, resume: bool, log
) -> TrainConfig:
    """The run's config: the saved one, changed as `config` may change it, when resuming.

    Writes nothing. Checks `out` (`keras_attn.training.paths.check_out`); a new run's
    `init_from` or `vocab_from` run must be one it can start from
    (`keras_attn.training.initialization.check_origin_run`).

    Resuming a run killed before it saved its config (the directory is missing or holds only
    temporary files) starts it with `config`.
    """
    found = paths.check_out(run.path, resume)
    if found == paths.RESUMABLE:
        return resumed_config(run.read_config(), config, str(run.path))
    if config is None:
        raise ConfigError(
            f"cannot resume: {run.path} holds no {CONFIG_FILE} yet; pass the run's config", []
        )
    if found == paths.UNSTARTED:
        log(f"{run.path} holds no {CONFIG_FILE} yet: starting the run from step 0")
    if config.init_from:
        config = resolve_init_config(config, RunDirectory(config.init_from), log, run.path)
    family = config.family()
    for field in ("init_from", "vocab_from"):
        if getattr(config, field):
            check_origin_run(config, family, run.path, field)
    # config.json records every option, defaults filled in
    config = dataclasses.replace(config, options=family.option_values(config.options))
    return with_family_tuning(config, family)  # and the schedule the run takes


def _training_data(
    run: RunDirectory, config: TrainConfig, train_split, family: ModelFamily | None = None
) -> BatchOrder:
    """The batch plan of the training split (the family's task makes it)."""
    family = family or config.family()
    return get_task(family.task).plan(run, config, family, train_split)


@dataclass
class _TrainingState:
    """What the loop trains and checkpoints, and where a non-chief worker writes."""

    model: keras.Model
    optimizer: keras.optimizers.Optimizer
    # (optimizer, variables) pairs: `optimizer` with the variables no other optimizer trains,
    # then the encoder optimizer with the encoder's (when the run sets encoder_learning_rate).
    groups: list
    step: tf.Variable
    manager: tf.train.CheckpointManager
    start: int
    private: Path | None


def _build_or_restore(
    run: RunDirectory,
    config: TrainConfig,
    family: ModelFamily,
    plan: BatchOrder,
    policy: str,
    strategy,
    chief: bool,
    log,
) -> _TrainingState:
    """Build the model and optimizer(s) under `strategy` and restore the newest checkpoint.

    A run that restores no checkpoint and names `init_from` starts from that run's weights
    (`keras_attn.training.initialization.initialize_from`); the report goes to `log` and to
    `init_from.json`.
    """
    keras.utils.set_random_seed(config.seed)
    with strategy.scope():
        model = get_task(family.task).build_model(run, config, family)
        model(plan.batch(0)[0])  # build every variable before checkpoint restore
        groups = _optimizer_groups(config, family, policy, model)
        for group_optimizer, variables in groups:
            group_optimizer.build(variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    # The optimizer holds the trainable variables; `model_state` adds the rest, among them the
    # dropout seed generators' states, so a resumed run draws the masks it would have drawn.
    optimizer = groups[0][0]
    extra = {"encoder_optimizer": groups[1][0]} if len(groups) > 1 else {}
    checkpoint = tf.train.Checkpoint(
        model=model,
        model_state=model.non_trainable_variables,
        optimizer=optimizer,
        step=step,
        **extra,
    )
    latest = restore_newest(checkpoint, run.file(CHECKPOINTS), log, forget_skipped=chief)
    if latest:
        log(f"resumed from {latest} at step {int(step.numpy())}")
    elif config.init_from:
        report = initialize_from(model, RunDirectory(config.init_from), log, out=run.path)
        if chief:
            run.write_json(INIT_REPORT, report)
    # Non-chief workers save too (a checkpoint may need every worker), into a private directory.
    private = None if chief else Path(tempfile.mkdtemp(prefix="keras-attn-worker-"))
    checkpoints = run.file(CHECKPOINTS) if chief else private / CHECKPOINTS
    manager = tf.train.CheckpointManager(checkpoint, str(checkpoints), max_to_keep=3)
    return _TrainingState(model, optimizer, groups, step, manager, int(step.numpy()), private)


def _optimizer_groups(config: TrainConfig, family: ModelFamily, policy: str, model) -> list:
    """`[(optimizer, variables), ...]`: one optimizer for every trainable variable, or, with
    `encoder_learning_rate`, a second one (its own peak rate and warm-up, Liu & Lapata, 2019,
    arXiv:1908.08345) for the variables of the family's encoder layers."""
    variables = model.trainable_variables
    if config.encoder_learning_rate is None:
        return [(build_optimizer(config, policy), variables)]
    encoder_ids = set()
    for name in family.encoder_layers:
        encoder_ids.update(id(v) for v in model.get_layer(name).trainable_variables)
    encoder = [v for v in variables if id(v) in encoder_ids]
    rest = [v for v in variables if id(v) not in encoder_ids]
    encoder_config = dataclasses.replace(
        config,
        learning_rate=config.encoder_learning_rate,
        warmup_steps=(
            config.warmup_steps
            if config.encoder_warmup_steps is None
            else config.encoder_warmup_steps
        ),
    )
    return [
        (build_optimizer(config, policy), rest),
        (build_optimizer(encoder_config, policy), encoder),
    ]


def _fit(
    run: RunDirectory,
    config: TrainConfig,
    family: ModelFamily,
    plan: BatchOrder,
    state: _TrainingState,
    policy: str,
    strategy,
    chief: bool,
    progress: bool,
    log,
    watcher: DevWatcher | None = None,
) -> dict:
    """Run steps `state.start + 1 … config.steps` (or until a time limit); returns the metrics.

    Checkpoints every `checkpoint_every` steps and at the last one; the chief also appends to
    `train_log.tsv` and the TensorBoard logs, and `watcher` evaluates on dev every
    `eval_every` steps before the last (`_finish` evaluates at the last). Raises
    `TrainingDiverged` (after flushing the logs) on a non-finite loss or weights.
    """
    model, optimizer, step, manager = state.model, state.optimizer, state.step, state.manager
    task = get_task(family.task)
    forward = task.training_outputs(model, config, family)

    def replica_step(features, labels, tokens):
        # This replica's share of the global batch's labels weights its mean, so the sum over
        # replicas is the global batch's mean loss.
        share = tf.math.divide_no_nan(plan.count_labels(labels), tokens)
        with tf.GradientTape(persistent=len(state.groups) > 1) as tape:
            outputs = forward(features, step)
            loss, accuracy = task.loss(labels, outputs, config)
            if model.losses:  # the layers' own terms (e.g. a regulariser added with add_loss)
                loss = loss + tf.add_n([tf.cast(term, tf.float32) for term in model.losses])
            loss = loss * share
            scaled = [group_optimizer.scale_loss(loss) for group_optimizer, _ in state.groups]
        squares = []
        for (group_optimizer, variables), scaled_loss in zip(state.groups, scaled, strict=True):
            gradients = _sum_over_replicas(tape.gradient(scaled_loss, variables))
            squares.append(_squared_norm(gradients, group_optimizer))
            group_optimizer.apply(gradients, variables)
        # The global batch's gradient: summed over replicas already, the same on each of them.
        return loss, accuracy * share, tf.sqrt(tf.add_n(squares))

    batches = strategies.distributed_batches(strategy, plan, state.start, config.steps)

    @tf.function(input_signature=[batches.element_spec], autograph=False)
    def train_step(batch):
        loss, accuracy, norm = strategy.run(replica_step, args=batch)
        total = tf.distribute.ReduceOp.SUM
        return (
            strategy.reduce(total, loss, axis=None),
            strategy.reduce(total, accuracy, axis=None),
            strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None),
        )

    writer = tf.summary.create_file_writer(str(run.file(LOGS))) if chief else None
    train_log = TrainLog(run, state.start) if chief else None
    bar = None
    if progress and chief:  # a live bar on a terminal; a line every 10 s in a log file
        interval = 0.05 if sys.stdout.isatty() else 10.0
        bar = keras.utils.Progbar(
            config.steps, stateful_metrics=["loss", "accuracy"], interval=interval
        )
    started = time.perf_counter()
    cpu_started = time.process_time()
    deadline = None if config.max_minutes is None else started + 60.0 * config.max_minutes
    cpu_deadline = None
    if config.max_cpu_minutes is not None:
        cpu_deadline = cpu_started + 60.0 * config.max_cpu_minutes
    out_of_time = False
    loss = accuracy = math.nan
    updates = int(optimizer.iterations.numpy())  # steps the optimizer applied (not skipped)
    skipped_in_a_row = 0
    try:
        for batch in batches:
            loss_t, accuracy_t, norm_t = train_step(batch)
            step.assign_add(1)
            current = int(step.numpy())
            loss, accuracy = float(loss_t), float(accuracy_t)
            now = int(optimizer.iterations.numpy())
            applied, updates = now > updates, now
            if math.isfinite(loss):
                skipped_in_a_row = 0
            else:
                # mixed_float16's loss scaler skips a step whose gradients are not finite and
                # leaves the weights as they were: an overflow that passes. A step applied from
                # a non-finite loss, or skipped steps that go on, is divergence.
                skipped_in_a_row += 1
                if applied:
                    raise _diverged(current, f"the loss is {loss}", manager)
                if skipped_in_a_row == MAX_SKIPPED_STEPS:
                    what = f"the loss was not finite in {MAX_SKIPPED_STEPS} steps in a row"
                    raise _diverged(current, what + " (the loss scaler skipped them)", manager)
            spent = []
            if deadline is not None and time.perf_counter() >= deadline:
                spent.append(f"--max-minutes {config.max_minutes}")
            if cpu_deadline is not None and time.process_time() >= cpu_deadline:
                spent.append(f"--max-cpu-minutes {config.max_cpu_minutes}")
            out_of_time = bool(spent)
            if bar is not None:
                bar.update(current, [("loss", loss), ("accuracy", accuracy)])
            if train_log is not None:
                train_log.append(current, loss, accuracy)
            last = current == config.steps or out_of_time
            if writer is not None and (current % 50 == 0 or last):
                with writer.as_default(step=current):
                    tf.summary.scalar("loss", loss)
                    tf.summary.scalar("token_accuracy", accuracy)
                    tf.summary.scalar("learning_rate", _learning_rate(optimizer))
                    tf.summary.scalar("gradient_norm", float(norm_t))
                    for name, value in task.training_scalars(config, current - 1).items():
                        tf.summary.scalar(name, value)
            if current % config.checkpoint_every == 0 or last:
                _check_weights(model, current, manager)
                manager.save(checkpoint_number=current)
            if watcher is not None and current % config.eval_every == 0 and not last:
                watcher.evaluate(model, current)
            if out_of_time:
                log(f"stopped at step {current} of {config.steps}: {' and '.join(spent)} spent")
                break
        elapsed = time.perf_counter() - started
        cpu_elapsed = time.process_time() - cpu_started
        if train_log is not None and train_log.rows:
            _, loss, accuracy = train_log.rows[-1]  # also right for a call with no steps left
        metrics = {
            "steps": int(step.numpy()),
            "steps_this_session": int(step.numpy()) - state.start,
            "train_seconds_this_session": round(elapsed, 1),
            "train_cpu_seconds_this_session": round(cpu_elapsed, 1),
            "final_loss": loss if math.isfinite(loss) else None,
            "final_token_accuracy": accuracy if math.isfinite(accuracy) else None,
            "training_examples": plan.num_examples,
            "precision": policy,
            "replicas": strategy.num_replicas_in_sync,
            "stopped_by_max_minutes": out_of_time,
        }
        _check_weights(model, int(step.numpy()), manager)  # restored ones too, if no step ran
    finally:
        if chief:
            writer.flush()
            train_log.close()
    return metrics


class TrainLog:
    """`train_log.tsv`: step, loss and token accuracy of every step, in step with the checkpoints.

    Opening it for a `train` call that starts at step `start` drops the rows after `start` (steps
    a killed process ran past its last checkpoint, which this call repeats), so the log of
    a run killed and resumed any number of times reads like the log of one uninterrupted run.
    Each row is flushed before the step's checkpoint is written.
    """

    HEADER = "step\tloss\ttoken_accuracy\n"

    def __init__(self, run: RunDirectory, start: int):
        self.rows = [row for row in read_train_log(run.file(TRAIN_LOG)) if row[0] <= start]
        lines = "".join(f"{s}\t{loss!r}\t{accuracy!r}\n" for s, loss, accuracy in self.rows)
        run.write_text(TRAIN_LOG, self.HEADER + lines)
        self._file = open(run.file(TRAIN_LOG), "a", encoding="utf-8")  # noqa: SIM115

    def append(self, step: int, loss: float, accuracy: float) -> None:
        self._file.write(f"{step}\t{loss!r}\t{accuracy!r}\n")
        self._file.flush()
        self.rows.append((step, loss, accuracy))

    def close(self) -> None:
        self._file.close()


def read_train_log(path: str | os.PathLike) -> list[tuple[int, float, float]]:
    """`(step, loss, token_accuracy)` rows of a `train_log.tsv`; a torn last line is skipped."""
    if not os.path.exists(path):
        return []
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines()[1:]:
        fields = line.split("\t")
        if len(fields) == 3:
            try:
                rows.append((int(fields[0]), float(fields[1]), float(fields[2])))
            except ValueError:
                continue
    return rows


def learning_rate_schedule(config: TrainConfig) -> keras.optimizers.schedules.LearningRateSchedule:
    """The schedule named by `config.schedule`, peaking at `config.learning_rate`.

    `cosine`: linear warm-up over `warmup_steps`, then cosine decay to 5 % of the peak at step
    `steps`. `inverse-sqrt`: Vaswani et al.'s `d_model^-0.5 · min(n^-0.5, n · warmup^-1.5)`,
    scaled so that its peak (at step `warmup_steps`) is `learning_rate`; it does not depend on
    `steps`. `halving`: Luong et al.'s constant rate, halved every `decay_every` steps from step
    `decay_start` (after the warm-up). All are functions of the step counter only, so a resumed run
    follows them exactly.
    """
    if config.schedule == "inverse-sqrt":
        return InverseSqrtSchedule.from_peak(config.learning_rate, config.warmup_steps)
    if config.schedule == "halving":
        return HalvingSchedule(
            config.learning_rate, config.decay_start, config.decay_every, config.warmup_steps
        )
    return warmup_cosine_schedule(config.learning_rate, config.warmup_steps, config.steps)


# Variables weight decay leaves alone, by a part of their names: biases, and the scale and offset
# of layer normalisation (as BERT's and most Transformers' training does).
NO_WEIGHT_DECAY = ["bias", "gamma", "beta"]


def build_optimizer(config: TrainConfig, policy: str) -> keras.optimizers.Optimizer:
    """Adam (or plain SGD, `optimizer="sgd"`) on `learning_rate_schedule(config)`, the gradient
    clipped to norm `config.clipnorm`.

    When the norm of the whole gradient (all variables together) exceeds `clipnorm`,
    `g <- clipnorm / ||g|| * g` (Pascanu et al., 2013, arXiv:1211.5063); 0 disables clipping.
    This is Keras' `global_clipnorm`: its per-variable `clipnorm` would change the direction of
    `g`. Under `mixed_float16` the optimizer is wrapped in a `LossScaleOptimizer`, which
    unscales the gradient before the inner optimizer clips it. The gradient it gets is already
    summed over replicas (see `keras_attn.training.optimizers`).

    With `weight_decay` `lambda`, each step first shrinks every weight, `w <- w - lr · lambda · w`,
    apart from the gradient's update (decoupled weight decay: Loshchilov & Hutter, 2019,
    arXiv:1711.05101; with Adam this is AdamW); biases and the scales and offsets of
    normalisation layers (`NO_WEIGHT_DECAY`, matched in the variables' names) keep theirs.

    Plain SGD is `w <- w - lr · g`: the step is proportional to the gradient, where Adam moves
    every weight by about `lr` whatever its gradient's size. Luong et al. (2015,
    arXiv:1508.04025) trained with it (`schedule="halving"`) on a loss summed over each
    sentence's target words; the loss here is their mean, so a rate for their loss does not
    carry over unchanged.
    """
    optimizer = OPTIMIZERS[config.optimizer](
        learning_rate_schedule(config),
        global_clipnorm=config.clipnorm or None,
        weight_decay=config.weight_decay or None,
    )
    if config.weight_decay:
        optimizer.exclude_from_weight_decay(var_names=NO_WEIGHT_DECAY)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def _check_weights(model: keras.Model, step: int, manager: tf.train.CheckpointManager) -> None:
    """Raise `TrainingDiverged` if a trainable variable holds a NaN or an infinity.

    A huge update can make the weights non-finite after a step whose loss was still finite; this
    runs before every checkpoint, so none is saved from such weights.
    """
    for variable in model.trainable_variables:
        if not bool(tf.reduce_all(tf.math.is_finite(variable))):
            raise _diverged(step, f"the weights of {variable.path} are not finite", manager)


def _diverged(step: int, what: str, manager: tf.train.CheckpointManager) -> TrainingDiverged:
    kept = manager.latest_checkpoint
    saved = f"nothing was saved after {kept}" if kept else "no checkpoint was saved"
    return TrainingDiverged(
        f"training diverged at step {step}: {what}; {saved} (a lower --learning-rate may help)"
    )


def _finish(
    run: RunDirectory,
    config: TrainConfig,
    family: ModelFamily,
    model: keras.Model,
    splits: dict,
    metrics: dict,
    log,
    watcher: DevWatcher | None = None,
) -> None:
    """Save `model.keras`, score the dev split and write `metrics.json` (updating `metrics`);
    `watcher` writes the scores to TensorBoard."""
    temporary = run.file(MODEL_FILE + ".tmp.keras")  # Keras insists on the .keras suffix
    model.save(temporary)
    os.replace(temporary, run.file(MODEL_FILE))
    if not config.eval_sentences or not splits["dev"]:
        metrics["dev_sentences"] = 0
        run.write_json(METRICS_FILE, metrics)
        return
    task = get_task(family.task)
    evaluation = task.evaluate(run, config, family, model, splits)
    metrics.update(evaluation)
    run.write_json(METRICS_FILE, metrics)
    if watcher is not None:
        watcher.write(model, metrics["steps"], evaluation)
    where = f"{metrics['dev_sentences']} sentences ({metrics['steps']} steps)"
    log(f"{task.summary(metrics)} on {where}")


def _squared_norm(gradients: list, optimizer) -> tf.Tensor:
    """The squared L2 norm of `gradients` (None ones left out), unscaled by a
    `LossScaleOptimizer`'s loss scale, in float32."""
    present = [tf.cast(g, tf.float32) for g in gradients if g is not None]
    square = tf.add_n([tf.reduce_sum(tf.square(g)) for g in present]) if present else 0.0
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        square = square / tf.square(tf.cast(optimizer.dynamic_scale, tf.float32))
    return tf.cast(square, tf.float32)


def _learning_rate(optimizer) -> float:
    """The learning rate `optimizer` applies at its current step (its schedule's value)."""
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


def _sum_over_replicas(gradients: list) -> list:
    """All-reduce (sum) the replicas' gradients; identity on one replica. Missing ones stay None."""
    present = [g for g in gradients if g is not None]
    summed = iter(
        tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, present)
    )
    return [None if g is None else next(summed) for g in gradients]
