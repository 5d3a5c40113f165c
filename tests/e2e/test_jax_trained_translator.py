"""Train under JAX, export and serve under TensorFlow.

A child process trains the translator of examples/own_translator.py with `model.fit` under
`KERAS_BACKEND=jax` (`--train-only`, the recipe of docs/training.md) and decodes held-out
sentences greedily (`tests/e2e/train_with_jax.py`); this
process exports the saved `.keras` file with `keras-attn export --keras-model` and checks that
the SavedModel's `translate` signature serves exactly those translations.
"""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("train_with_jax.py")

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow_only]


def train_under_jax(out: Path) -> dict:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": path}
    child = subprocess.run(
        [sys.executable, str(CHILD), str(out)], env=env, capture_output=True, text=True, timeout=600
    )
    assert child.returncode == 0, child.stderr[-3000:]
    loss = float(re.search(r"trained \d+ epochs: loss ([\d.]+)", child.stdout).group(1))
    assert loss < 0.8 * math.log(16)  # below a uniform guess over the 16 tokens: it trained
    return json.loads((out / "greedy.json").read_text())


def test_the_served_translations_are_the_jax_models_greedy_translations(tmp_path):
    greedy = train_under_jax(tmp_path / "jax")

    base = tmp_path / "models" / "translator"
    vocab = str(tmp_path / "jax" / "vocab.txt")
    status = cli(
        [
            "export",
            "--keras-model",
            str(tmp_path / "jax" / "translator.keras"),
            "--source-vocab",
            vocab,
            "--target-vocab",
            vocab,
            "--model_base_path",
            str(base),
            "--max-output-length",
            "10",
            "--skip-check",
        ]
    )
    assert status == 0

    translate = tf.saved_model.load(str(base / "1")).signatures["translate"]
    served = translate(text=tf.constant(greedy["texts"]))
    assert [t.decode() for t in served["translation"].numpy()] == greedy["translation"]
    tokens = [[t.decode() for t in row if t] for row in served["tokens"].numpy()]
    assert tokens == greedy["tokens"]
    np.testing.assert_allclose(served["scores"].numpy(), greedy["scores"], rtol=1e-4, atol=1e-4)
    assert len(set(greedy["translation"])) > 1  # not one answer for every sentence
