"""Checks of the directories a training run is given: `out`, `init_from` and `vocab_from`.

They read the file system only (no TensorFlow), so `keras-attn train` runs them before it loads
the training machinery, and `train` runs them again before it writes anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from keras_attn.errors import (
    ConfigError,
    PathExistsError,
    PathNotADirectoryError,
    PathNotFoundError,
)
from keras_attn.formats import CONFIG_FILE, MODEL_FILE, RunDirectory

# What `check_out` finds in `out`.
NEW = "new"  # no run yet: a new run starts there
RESUMABLE = "resumable"  # a run with its config, which resume continues
UNSTARTED = "unstarted"  # a run killed before it wrote its config: resume starts it from step 0


def check_out(out: str | os.PathLike, resume: bool) -> str:
    """What `out` holds (`NEW`, `RESUMABLE` or `UNSTARTED`), if a run can be written there.

    Raises:
        PathNotADirectoryError: `out` is, or lies under, a file.
        ConfigError: the nearest existing directory of `out` is not writable.
        PathExistsError: `out` holds another run (or other files) and `resume` is false.
        PathNotFoundError: `resume` with an `out` that holds files but no config.
    """
    run = RunDirectory(out)
    for path in (run.path, *run.path.parents):  # the nearest existing one must be a directory
        if path.exists():
            if not path.is_dir():
                where = "" if path == run.path else f" ({path} is a file)"
                raise PathNotADirectoryError(f"out {run.path} is not a directory{where}", ["out"])
            if not os.access(path, os.W_OK | os.X_OK):
                raise ConfigError(f"out {run.path}: {path} is not writable", ["out"])
            break
    if resume:
        if run.exists():
            return RESUMABLE
        if run.holds_only_temporaries():
            return UNSTARTED
        raise PathNotFoundError(f"cannot resume: {run.path} holds no {CONFIG_FILE}", ["out"])
    if run.path.exists() and any(run.path.iterdir()):
        raise PathExistsError(
            f"{run.path} already holds a run; pass resume to continue it or choose another out",
            ["resume", "out"],
        )
    return NEW


def check_origin(path: str | os.PathLike, field: str) -> dict:
    """The saved config fields of the run `init_from` or `vocab_from` (`field`) names.

    An `init_from` run must have finished (its `model.keras` holds the weights to start from);
    a `vocab_from` run needs only its config and vocabularies, written before training starts.

    Raises:
        PathNotFoundError: `path` is not a run directory, or (`init_from`) not a finished one.
    """
    run = RunDirectory(path)
    if not run.exists():
        what = "does not exist" if not Path(path).exists() else f"has no {CONFIG_FILE}"
        raise PathNotFoundError(f"{field} {run.path} is not a run directory (it {what})", [field])
    if field == "init_from" and not run.file(MODEL_FILE).exists():
        raise PathNotFoundError(
            f"{field} {run.path} has no {MODEL_FILE}: its training did not finish", [field]
        )
    return run.read_config_fields()
