"""File formats that training, export and serving share.

A run directory, written by `keras_attn.training.train` and read by `keras-attn export`:

- `config.json`: the run's `TrainConfig` fields, and the dtype policy it trained under;
- `source_vocab.txt` and `target_vocab.txt` (a translator) or `vocab.txt` (a language model):
  WordPiece vocabularies, one token a line;
- `checkpoints/`, `logs/` (TensorBoard), `train_log.tsv`, `model.keras`, `metrics.json`;
- `model_file.py`: a copy of the `--model-file` that defines the run's model family, when the
  run has one (`config.json` records the path it was copied from as `model_file` and the
  family's options as `options`); resuming and exporting import this copy.

Warm-up records, written by `keras-attn export` and replayed by `keras-attn serve` (and by stock
TensorFlow Serving): `VERSION/assets.extra/tf_serving_warmup_requests`, a TFRecord file of at
most `MAX_WARMUP_RECORDS` `PredictionLog` messages.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keras_attn.errors import ConfigError, UserError

if TYPE_CHECKING:
    import keras

    from keras_attn.text.tokenizer import WordPieceTokenizer

CONFIG_FILE = "config.json"
MODEL_FILE = "model.keras"
METRICS_FILE = "metrics.json"
MODEL_SOURCE = "model_file.py"  # the run's copy of the file defining its model family
SOURCE_VOCAB = "source_vocab.txt"
TARGET_VOCAB = "target_vocab.txt"
VOCAB = "vocab.txt"  # the one vocabulary of a language-model run
CHECKPOINTS = "checkpoints"
LOGS = "logs"
TRAIN_LOG = "train_log.tsv"
INIT_REPORT = "init_from.json"  # what `--init-from` loaded: layers loaded, new and unused
LABELS = "labels.txt"  # a classifier's class names (a tagger's tag names), one per line

# Default hard limit on generated tokens; families with preallocated caches size them to it.
MAX_OUTPUT_LENGTH = 128

WARMUP_DIRECTORY = "assets.extra"
WARMUP_FILENAME = "tf_serving_warmup_requests"
MAX_WARMUP_RECORDS = 1000


def warmup_path(version_path: str | os.PathLike) -> str:
    """Where a SavedModel version keeps its warm-up requests."""
    return os.path.join(os.fspath(version_path), WARMUP_DIRECTORY, WARMUP_FILENAME)


# How an exported version decodes (`{"decoder": "greedy" | "beam", "beam_size", ...}`), beside
# the warm-up file: TensorFlow Serving's metadata holds the signatures only, and the attention
# viewer of `keras-attn serve --ui` shows it. Stock TensorFlow Serving ignores the file.
EXPORT_DESCRIPTION_FILENAME = "keras_attn_export.json"


def export_description_path(version_path: str | os.PathLike) -> str:
    """Where a SavedModel version written by `keras-attn export` describes its decoding."""
    return os.path.join(os.fspath(version_path), WARMUP_DIRECTORY, EXPORT_DESCRIPTION_FILENAME)


def read_export_description(version_path: str | os.PathLike) -> dict | None:
    """The decoding description of a version (see `EXPORT_DESCRIPTION_FILENAME`); None when the
    version has none (not written by keras_attn, or older) or it does not parse as an object."""
    try:
        with open(export_description_path(version_path), encoding="utf-8") as file:
            description = json.load(file)
    except (OSError, ValueError):
        return None
    return description if isinstance(description, dict) else None


class RunDirectory:
    """Paths of a run directory and the files that make it resumable and exportable."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def file(self, name: str) -> Path:
        return self.path / name

    def exists(self) -> bool:
        return self.file(CONFIG_FILE).exists()

    def temporary(self, name: str) -> Path:
        """Where `name` is written before `os.replace` moves it into place."""
        return self.file(name + ".tmp")

    def write_text(self, name: str, text: str) -> None:
        """Write atomically: a process killed at any moment leaves the old file or the new one."""
        temporary = self.temporary(name)
        temporary.write_text(text)
        os.replace(temporary, self.file(name))

    def write_json(self, name: str, data: dict) -> None:
        self.write_text(name, json.dumps(data, indent=2, ensure_ascii=False) + "\n")

    def holds_only_temporaries(self) -> bool:
        """True for a missing or empty directory, or one a run was killed in before its config."""
        return not self.path.exists() or all(p.name.endswith(".tmp") for p in self.path.iterdir())

    def read_config_fields(self) -> dict[str, Any]:
        """The fields saved in `config.json`, as a dict; `UserError` when the file is not one."""
        path = self.file(CONFIG_FILE)
        try:
            fields = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise UserError(f"{path} is not a run's config.json ({error})") from None
        if not isinstance(fields, dict):
            raise UserError(f"{path} is not a run's config.json (not a JSON object)")
        return fields

    def family(self):
        """The run's model family (a `keras_attn.models.Family`): `config.json`'s `model`, looked
        up after importing the run's copy of its `--model-file` (`model_file.py`), if it has one.

        Raises:
            keras_attn.errors.ConfigError: the family is not known (nor registered by the run's
                model file).
        """
        from keras_attn.models.families import get_family, load_model_file

        if self.file(MODEL_SOURCE).exists():
            load_model_file(self.file(MODEL_SOURCE))
        return get_family(self.read_config_fields()["model"])

    def tokenizer(self) -> WordPieceTokenizer:
        """The one tokenizer of a language-model run."""
        from keras_attn.text.tokenizer import WordPieceTokenizer
        from keras_attn.text.vocab import load_vocab

        return WordPieceTokenizer(load_vocab(self.file(VOCAB)))

    def tokenizers(self) -> tuple[WordPieceTokenizer, WordPieceTokenizer]:
        """The source and target tokenizers of a translator run."""
        from keras_attn.text.tokenizer import WordPieceTokenizer
        from keras_attn.text.vocab import load_vocab

        return (
            WordPieceTokenizer(load_vocab(self.file(SOURCE_VOCAB))),
            WordPieceTokenizer(load_vocab(self.file(TARGET_VOCAB))),
        )

    def load_model(self) -> keras.Model:
        """The run's `model.keras`, not compiled (importing keras_attn registered its layers)."""
        import keras

        return keras.saving.load_model(self.file(MODEL_FILE), compile=False)


def load_finite_model(run: RunDirectory):
    """The run's model; a ConfigError if a weight holds a NaN or an infinity (a diverged run,
    which is not exported)."""
    model = run.load_model()
    check_finite(model, run.file(MODEL_FILE), "the run diverged", "run_path")
    return model


def check_finite(model, path, why: str, field: str) -> None:
    """A ConfigError naming `path` and `field` if a weight of `model` is a NaN or an infinity
    (`why` says how it came to be; such a model is not exported)."""
    import numpy as np

    for weight in model.weights:
        if not np.all(np.isfinite(weight.numpy())):
            raise ConfigError(
                f"{path} has non-finite weights ({weight.path}): {why}, so it is not exported",
                [field],
            )
