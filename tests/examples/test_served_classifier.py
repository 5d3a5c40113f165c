import importlib.util
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "served_classifier.py"


def load_example():
    spec = importlib.util.spec_from_file_location("served_classifier", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_served_classify_scores_are_the_keras_models_probabilities(tmp_path):
    """Four epochs; over seeds 0-4 the test accuracy is 1.0 (three classes: chance is 1/3)."""
    example = load_example()
    lines = []
    results = example.run(tmp_path, epochs=4, seed=0, log=lines.append)
    assert results["accuracy"] >= 0.95, lines
    assert (tmp_path / "models" / "classifier" / "1" / "saved_model.pb").exists()
    expected = results["in_process"]
    assert expected.shape == (len(example.QUERIES), 3)
    np.testing.assert_allclose(results["grpc"], expected, atol=1e-6)
    np.testing.assert_allclose(results["rest"], expected, atol=1e-6)
    assert results["labels"] == [example.LABELS] * (2 * len(example.QUERIES))
    # The three sentences with a noun go to its class.
    assert expected[:3].argmax(-1).tolist() == [0, 1, 2]
    assert any(line.startswith("  'a small river'") and "-> place" in line for line in lines)
