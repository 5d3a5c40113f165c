"""The attention benchmark's functions run end to end at minimal sizes (no timing assertions)."""

import importlib.util
import pathlib

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "attention.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("attention_benchmark", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_step_benchmark_reports_every_variant(bench):
    result = bench.benchmark_train_step(batch=2, length=4, dim=8, heads=2, rounds=1, warmup=1)
    for jit in ("", "_jit"):
        for name in ("keras", "ours", "ours_unfused", "ours_fused_attention"):
            assert result[f"{name}{jit} tokens/s"] > 0
        assert result[f"ours{jit} / keras{jit}"] > 0
        assert result[f"ours_fused_attention{jit} / keras{jit}"] > 0
    table = bench.format_train_table((2, 4, 8, 2), result)
    assert "ours_jit / keras_jit" in table


def test_train_step_updates_weights_and_lowers_loss(bench):
    import keras
    import numpy as np
    import tensorflow as tf

    layer = keras.layers.Dense(3)
    x = tf.constant(np.random.default_rng(0).normal(size=(4, 3)), tf.float32)
    layer(x)
    step = bench.make_train_step(layer, layer.trainable_variables, jit_compile=False)
    first = float(step(x))
    for _ in range(20):
        last = float(step(x))
    assert last < first


def test_kernel_scaling_and_crossover(bench):
    rows = bench.benchmark_kernel_scaling(
        [8, 16], rounds=1, warmup=1, dim=8, heads=2, num_features=4
    )
    assert [row["T"] for row in rows] == [8, 16]
    assert all(row["softmax_ms"] > 0 and row["kernel_ms"] > 0 for row in rows)
    assert (
        bench.crossover(
            [
                {"T": 1, "softmax_ms": 1.0, "kernel_ms": 2.0},
                {"T": 2, "softmax_ms": 3.0, "kernel_ms": 2.0},
                {"T": 3, "softmax_ms": 9.0, "kernel_ms": 3.0},
            ]
        )
        == 2
    )
    assert bench.crossover([{"T": 1, "softmax_ms": 1.0, "kernel_ms": 2.0}]) is None
    assert "crossover" in bench.format_kernel_table(rows, num_features=4)
