"""The recurrent benchmark's functions run end to end at minimal sizes (no timing assertions)."""

import importlib.util
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "recurrent.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("recurrent_benchmark", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name,cell", [("bidirectional", "gru"), ("deep", "lstm")])
def test_encoder_benchmark_reports_both_sides(bench, name, cell):
    result = bench.benchmark_encoder(name, cell, 2, 3, 4, 4, rounds=1, warmup=1)
    for side in ("keras", "ours"):
        for kind in ("forward", "train"):
            assert result[f"{side} {kind} ms"] > 0
    assert result["forward keras/ours"] > 0 and result["train keras/ours"] > 0
    assert "train keras/ours" in bench.format_encoder_table(name, cell, (2, 3, 4, 4), result)


class NotXlaCompilable(keras.layers.Layer):
    """Runs in a plain tf.function, but XLA cannot compile `numpy_function`."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(3)

    def call(self, inputs, memory):
        one = tf.numpy_function(lambda: np.float32(1.0), [], tf.float32)
        return self.dense(inputs) * one


def test_decoder_benchmark_covers_every_decoder_and_reports_jit_failures(bench):
    decoders = {**bench.DECODERS, "NoXla": lambda units: NotXlaCompilable()}
    results = bench.benchmark_decoders(2, 3, 2, 4, 4, rounds=1, warmup=1, decoders=decoders)
    assert set(results) == set(decoders)
    assert {"BahdanauDecoder", "LuongDecoder"} <= set(bench.DECODERS)
    assert isinstance(results["NoXla"]["no jit"], float), results["NoXla"]
    assert results["NoXla"]["jit"].startswith("n/a (")
    for row in results.values():
        for label in ("no jit", "jit"):
            value = row[label]
            assert (isinstance(value, float) and value > 0) or value.startswith("n/a (")
    table = bench.format_decoder_table((2, 3, 2, 4, 4), results)
    assert "BahdanauDecoder" in table and "LuongDecoder" in table and "n/a (" in table
