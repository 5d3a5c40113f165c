"""Resuming from the newest intact checkpoint of a run's `checkpoints/` directory."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import tensorflow as tf

from keras_attn.errors import ConfigError

STATE_FILE = "checkpoint"  # `tf.train.CheckpointManager`'s record of the checkpoints it kept


def restore_newest(
    checkpoint: tf.train.Checkpoint,
    directory: str | os.PathLike,
    log: Callable[[str], None],
    forget_skipped: bool = True,
) -> str | None:
    """Restore the newest recorded checkpoint that restores; returns its path.

    The checkpoints recorded in `directory`'s state file are tried newest first. One that does
    not restore (a missing, truncated or garbled `.index` or `.data-*` file, or one that does not
    match `checkpoint`'s objects) is skipped with one `log` line, `skipped checkpoint PATH:
    REASON`, and the next older one is tried. With `forget_skipped`, the state file is then
    rewritten without the skipped checkpoints, so that the restored one is the latest again and a
    `tf.train.CheckpointManager` opened on `directory` saves after it as after any checkpoint.

    A directory with no state file holds no recorded checkpoint (a run stopped before its first
    one counted): returns None and restores nothing.

    Raises:
        keras_attn.errors.ConfigError: when the state file cannot be read, or none of its
            checkpoints restores (the message says how to recover).
    """
    directory = os.fspath(directory)
    state_file = os.path.join(directory, STATE_FILE)
    if not tf.io.gfile.exists(state_file):
        return None
    state = _read_state(directory)
    if state is None or not state.model_checkpoint_path:
        raise ConfigError(
            f"cannot resume: {state_file} is unreadable; write `model_checkpoint_path: "
            '"ckpt-N"` into it (N: the newest checkpoint to resume from) or move '
            f"{directory} away to start the run over"
        )
    recorded = list(state.all_model_checkpoint_paths)
    if state.model_checkpoint_path not in recorded:
        recorded.append(state.model_checkpoint_path)
    skipped = {}  # path: why it did not restore, newest first
    for path in reversed(recorded):
        try:
            checkpoint.restore(path).assert_existing_objects_matched()
        except Exception as error:  # whatever a damaged checkpoint raises, the next one is tried
            skipped[path] = _first_line(error)
            log(f"skipped checkpoint {path}: {skipped[path]}")
            continue
        if skipped and forget_skipped:
            _forget(directory, state, set(skipped))
        return path
    newest, reason = next(iter(skipped.items()))
    raise ConfigError(
        f"cannot resume: none of the {len(recorded)} checkpoints recorded in {directory} "
        f"restores (the newest, {newest}: {reason}); move {directory} away to start the run over"
    )


def _read_state(directory: str):
    """The state file's `CheckpointState`, or None where it cannot be parsed."""
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel(logging.ERROR)  # TensorFlow warns of a garbled file, which the caller reports
    try:
        return tf.train.get_checkpoint_state(directory)
    except ValueError:  # an empty file
        return None
    finally:
        logger.setLevel(level)


def _first_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _forget(directory: str, state, skipped: set[str]) -> None:
    """Rewrite the state file without the `skipped` checkpoints (their files are left alone)."""
    paths = list(state.all_model_checkpoint_paths)
    timestamps = list(state.all_model_checkpoint_timestamps)
    kept = [i for i, path in enumerate(paths) if path not in skipped]
    # Names relative to the directory, as the manager writes them (with an absolute `save_dir`,
    # TensorFlow writes the paths as given).
    names = [os.path.basename(paths[i]) for i in kept]
    tf.compat.v1.train.update_checkpoint_state(
        os.path.abspath(directory),
        names[-1],
        all_model_checkpoint_paths=names,
        all_model_checkpoint_timestamps=(
            [timestamps[i] for i in kept] if len(timestamps) == len(paths) else None
        ),
        last_preserved_timestamp=state.last_preserved_timestamp,
    )
