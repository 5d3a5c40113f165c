"""experiments/gpu_translator.py: its three stages on a tiny corpus, here under TensorFlow."""

import importlib.util
import json
import pathlib
import sys

import numpy as np
import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "gpu_translator.py"
WORDS = "red green blue black white cat dog bird fish tree sun moon".split()


@pytest.fixture(scope="module")
def experiment():
    spec = importlib.util.spec_from_file_location("gpu_translator_experiment", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_detokenize_is_what_the_served_translator_writes(experiment):
    vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "¿", "dónde", "est", "##á", "?", ",", "sí"]
    ids = [2, 4, 5, 6, 7, 8, 3, 10]  # START ¿ dónde est ##á ? END sí
    assert experiment.detokenize(ids, vocab) == "¿dónde está?"
    assert experiment.detokenize([10, 0, 9, 10, 3], vocab) == "sí, sí"
    assert experiment.length_limit(7) == 24 and experiment.length_limit(100) == 128


@pytest.mark.slow
def test_prepare_train_serve_gives_the_same_translations(experiment, tmp_path):
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(120):
        words = list(rng.choice(WORDS, size=rng.integers(2, 6)))
        lines.append(f"{' '.join(words)}\t{' '.join(reversed(words))}")
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("\n".join(lines) + "\n")
    data, trained, served = tmp_path / "data", tmp_path / "trained", tmp_path / "served"

    experiment.prepare(str(corpus), data, vocab_size=60, test_sentences=None)
    test = json.loads((data / "test.json").read_text())
    assert len(test["sources"]) == len(test["source_ids"]) == len(test["references"]) > 0

    experiment.train(data, trained, 0.0, 16, "float32", 0, num_layers=1, d_model=16)
    result = json.loads((trained / "gpu_translations.json").read_text())
    assert result["steps"] >= 1 and len(result["epochs"]) == 1
    assert len(result["translations"]) == len(test["sources"])
    for ids in result["ids"]:  # within the served length limit, END included
        assert 1 <= len(ids) <= experiment.length_limit(max(map(len, test["source_ids"])))

    assert experiment.serve(data, trained, served) == 0
    summary = json.loads((served / "served.json").read_text())
    assert summary["identical_translations"] == summary["sentences"] == len(test["sources"])
    assert summary["translations"] == result["translations"]
    assert summary["served_bleu"] == result["bleu"]
