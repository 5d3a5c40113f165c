"""Attention speed, side by side in one process: our layers against Keras' and against each other.

    python benchmarks/attention.py [--quick]

(a) `keras_attn` `MultiHeadAttention` against `keras.layers.MultiHeadAttention` (same sizes, same
    initial weights): one training step (forward, backward, SGD update) on self-attention, timed
    with and without `jit_compile=True`, plus our layer with its fused Q/K/V projection turned off
    (keys passed as a separate tensor) to show what the fusion buys, and our layer with
    `use_fused_attention=True` (`keras.ops.dot_product_attention` instead of the explicit
    softmax; on TensorFlow the default keeps the explicit path). Prints tokens/s and the median
    of the per-round throughput ratios against Keras.
(b) `KernelAttention` (Performer, linear in T) against softmax `MultiHeadAttention` (quadratic in
    T): forward time for T = 256 .. 4096 and the shortest T at which the kernel form is faster.

Every variant is warmed up (tracing and XLA compilation excluded), then timed in interleaved
rounds (A, B, C, A, B, C, ...) so that load changes on a shared machine hit all variants alike;
the median over rounds is reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_attn.layers.attention.kernel_attention import KernelAttention  # noqa: E402
from keras_attn.layers.attention.multi_head_attention import MultiHeadAttention  # noqa: E402

TRAIN_SHAPES = ((32, 64, 256, 8), (8, 512, 256, 8))  # (batch, T, model dim, heads)
KERNEL_LENGTHS = (256, 512, 1024, 2048, 4096)


def time_interleaved(
    fns: dict[str, Callable[[], object]], rounds: int, warmup: int
) -> dict[str, list[float]]:
    """Seconds per call of every function, `rounds` times each, called round-robin after warm-up."""
    for fn in fns.values():
        for _ in range(warmup):
            _block(fn())
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            _block(fn())
            times[name].append(time.perf_counter() - start)
    return times


def _block(result: object) -> None:
    """Wait for the values (TF runs eagerly, but make the dependency explicit)."""
    for x in tf.nest.flatten(result):
        if hasattr(x, "numpy"):
            x.numpy()


def _copy_into_ours(theirs: keras.layers.MultiHeadAttention, ours: MultiHeadAttention) -> None:
    for name, dense in (
        ("query", theirs._query_dense),
        ("key", theirs._key_dense),
        ("value", theirs._value_dense),
        ("output", theirs._output_dense),
    ):
        getattr(ours, f"{name}_kernel").assign(dense.kernel)
        getattr(ours, f"{name}_bias").assign(dense.bias)


def make_train_step(
    forward: Callable[[tf.Tensor], tf.Tensor], variables: list, jit_compile: bool
) -> Callable[[tf.Tensor], tf.Tensor]:
    """A compiled `x -> loss` step: forward, mean-square loss, gradients, SGD update."""
    optimizer = keras.optimizers.SGD(learning_rate=1e-3)
    optimizer.build(variables)

    @tf.function(jit_compile=jit_compile)
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(forward(x)))
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    return step


def benchmark_train_step(
    batch: int, length: int, dim: int, heads: int, rounds: int, warmup: int
) -> dict[str, float]:
    """Tokens/s of one training step for every variant, and ratios against Keras (same jit)."""
    key_dim = dim // heads
    x = tf.constant(np.random.default_rng(0).normal(size=(batch, length, dim)), tf.float32)
    theirs = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=key_dim)
    ours = MultiHeadAttention(num_heads=heads, key_dim=key_dim)
    fused = MultiHeadAttention(num_heads=heads, key_dim=key_dim, use_fused_attention=True)
    for layer in (theirs, ours, fused):
        layer(x, x)
    _copy_into_ours(theirs, ours)
    _copy_into_ours(theirs, fused)

    forwards = {
        "keras": (lambda t: theirs(t, t), theirs),
        "ours": (lambda t: ours(t, t), ours),  # query is value: one fused QKV einsum
        "ours_unfused": (lambda t: ours(t, t, key=tf.identity(t)), ours),  # 3 projections
        "ours_fused_attention": (lambda t: fused(t, t), fused),  # keras.ops.dot_product_attention
    }
    steps = {}
    for jit in (False, True):
        for name, (forward, layer) in forwards.items():
            label = f"{name}{'_jit' if jit else ''}"
            step = make_train_step(forward, layer.trainable_variables, jit_compile=jit)
            steps[label] = lambda step=step: step(x)
    times = time_interleaved(steps, rounds=rounds, warmup=warmup)
    tokens = batch * length
    result = {f"{label} tokens/s": tokens / statistics.median(t) for label, t in times.items()}
    for jit in ("", "_jit"):
        for name in ("ours", "ours_unfused", "ours_fused_attention"):
            ratios = [
                k / o for k, o in zip(times[f"keras{jit}"], times[f"{name}{jit}"], strict=True)
            ]
            result[f"{name}{jit} / keras{jit}"] = statistics.median(ratios)
    return result


def benchmark_kernel_scaling(
    lengths: Sequence[int],
    rounds: int,
    warmup: int,
    batch: int = 1,
    dim: int = 64,
    heads: int = 4,
    num_features: int = 64,
) -> list[dict[str, float]]:
    """Forward seconds of KernelAttention and softmax MultiHeadAttention for every length."""
    rows = []
    for length in lengths:
        x = tf.constant(np.random.default_rng(length).normal(size=(batch, length, dim)), tf.float32)
        softmax_layer = MultiHeadAttention(num_heads=heads, key_dim=dim // heads)
        kernel_layer = KernelAttention(
            num_heads=heads, key_dim=dim // heads, num_features=num_features, seed=0
        )
        # Build eagerly: XLA cannot lift the variable creation (the kernel layer's random
        # features are weights drawn in build) out of a jit-compiled first call.
        softmax_layer(x, x)
        kernel_layer(x, x)
        fns = {
            "softmax": tf.function(lambda t, layer=softmax_layer: layer(t, t), jit_compile=True),
            "kernel": tf.function(lambda t, layer=kernel_layer: layer(t, t), jit_compile=True),
        }
        times = time_interleaved(
            {name: (lambda fn=fn, x=x: fn(x)) for name, fn in fns.items()}, rounds, warmup
        )
        rows.append(
            {
                "T": length,
                "softmax_ms": 1e3 * statistics.median(times["softmax"]),
                "kernel_ms": 1e3 * statistics.median(times["kernel"]),
            }
        )
    return rows


def crossover(rows: Sequence[dict[str, float]]) -> int | None:
    """The shortest T from which on the kernel form is faster at every measured length."""
    faster = [row["kernel_ms"] < row["softmax_ms"] for row in rows]
    for index, row in enumerate(rows):
        if all(faster[index:]):
            return int(row["T"])
    return None


def format_train_table(shape: tuple[int, int, int, int], result: dict[str, float]) -> str:
    batch, length, dim, heads = shape
    lines = [f"(a) train step, B={batch} T={length} D={dim} H={heads}"]
    lines += [
        f"    {name:<40} {value:>12.0f}" for name, value in result.items() if "tokens" in name
    ]
    lines += [
        f"    {name:<40} {value:>12.2f}x" for name, value in result.items() if "tokens" not in name
    ]
    return "\n".join(lines)


def format_kernel_table(rows: Sequence[dict[str, float]], num_features: int) -> str:
    lines = [
        f"(b) forward, B=1 D=64 H=4, KernelAttention m={num_features} vs softmax attention",
        f"    {'T':>6} {'softmax ms':>12} {'kernel ms':>12} {'softmax/kernel':>15}",
    ]
    for row in rows:
        ratio = row["softmax_ms"] / row["kernel_ms"]
        lines.append(
            f"    {row['T']:>6} {row['softmax_ms']:>12.2f} {row['kernel_ms']:>12.2f} "
            f"{ratio:>14.2f}x"
        )
    lines.append(f"    crossover (kernel faster from T =): {crossover(rows)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (< 3 minutes)")
    args = parser.parse_args(argv)
    rounds, warmup = (5, 2) if args.quick else (15, 3)
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {os.cpu_count()} CPUs")
    for shape in TRAIN_SHAPES:
        result = benchmark_train_step(*shape, rounds=rounds, warmup=warmup)
        print(format_train_table(shape, result), flush=True)
    rows = benchmark_kernel_scaling(KERNEL_LENGTHS, rounds=max(3, rounds // 2), warmup=1)
    print(format_kernel_table(rows, num_features=64))
    return 0


if __name__ == "__main__":
    sys.exit(main())
