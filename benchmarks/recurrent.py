"""Recurrent speed, side by side in one process: our encoders against Keras', and our decoders.

    python benchmarks/recurrent.py [--quick]

(a) Encoders against the Keras layers they wrap, same sizes and the same weights (copied):
    `BidirectionalEncoder` against `keras.layers.Bidirectional(LSTM/GRU)`, and `DeepRNN` against
    hand-stacked `keras.layers.LSTM/GRU` layers. Forward pass and one training step (forward,
    backward, SGD update), both inside `tf.function`. We wrap rather than rewrite, so the target
    is a ratio `keras time / our time` >= 0.95.
(b) The attention decoders (`DECODERS`: one entry per decoder class): one training step with
    teacher forcing, reported as microseconds per target token (batch x T_y), with and without
    `jit_compile=True`. A decoder that XLA cannot compile is reported as "n/a (reason)".

Every variant is warmed up (tracing and XLA compilation excluded), then timed in interleaved
rounds (A, B, A, B, ...) so load changes on a shared machine hit all variants alike; medians over
rounds are reported. The timing helpers are those of `benchmarks/attention.py`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from attention import make_train_step, time_interleaved  # noqa: E402

from keras_attn.layers import (  # noqa: E402
    BahdanauDecoder,
    BidirectionalEncoder,
    DeepRNN,
    LuongDecoder,
)

KERAS_RNN = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
ENCODER_SHAPE = (32, 64, 128, 128)  # (batch, T, input dim, units)
DECODER_SHAPE = (32, 24, 24, 64, 128)  # (batch, T_x, T_y, embedding dim, units)

# One entry per attention decoder: name -> constructor taking `units`. Add a decoder here.
DECODERS: dict[str, Callable[[int], keras.layers.Layer]] = {
    "BahdanauDecoder": lambda units: BahdanauDecoder(units),
    "LuongDecoder": lambda units: LuongDecoder(units),
    # Without input feeding: one keras.layers.LSTM pass, then attention from all states at once.
    "Luong, no feeding": lambda units: LuongDecoder(units, input_feeding=False),
}


def _keras_pair(name: str, cell: str, units: int, num_layers: int):
    """Our encoder and the Keras layers it wraps: `(ours, ours_fn, keras_layers, keras_fn)`."""
    if name == "bidirectional":
        ours = BidirectionalEncoder(units, cell=cell)
        theirs = [
            keras.layers.Bidirectional(
                KERAS_RNN[cell](units, return_sequences=True, return_state=True)
            )
        ]
    else:
        ours = DeepRNN(units, num_layers=num_layers, cell=cell)
        theirs = [
            KERAS_RNN[cell](units, return_sequences=True, return_state=True)
            for _ in range(num_layers)
        ]

    def keras_forward(x):
        for layer in theirs:
            x = layer(x)[0]
        return x

    return ours, (lambda x: ours(x)[0]), theirs, keras_forward


def benchmark_encoder(
    name: str,
    cell: str,
    batch: int,
    length: int,
    dim: int,
    units: int,
    rounds: int,
    warmup: int,
    num_layers: int = 2,
) -> dict[str, float]:
    """Milliseconds of forward and train step, ours and Keras', and the median ratios."""
    x = tf.constant(np.random.default_rng(0).normal(size=(batch, length, dim)), tf.float32)
    ours, ours_forward, theirs, keras_forward = _keras_pair(name, cell, units, num_layers)
    ours_forward(x)
    keras_forward(x)
    weights = [w for layer in theirs for w in layer.get_weights()]
    ours.set_weights(weights)
    np.testing.assert_allclose(ours_forward(x).numpy(), keras_forward(x).numpy(), atol=1e-5)
    keras_variables = [v for layer in theirs for v in layer.trainable_variables]
    fns = {
        "keras forward": tf.function(keras_forward),
        "ours forward": tf.function(ours_forward),
        "keras train": make_train_step(keras_forward, keras_variables, jit_compile=False),
        "ours train": make_train_step(ours_forward, ours.trainable_variables, jit_compile=False),
    }
    times = time_interleaved({k: (lambda fn=fn: fn(x)) for k, fn in fns.items()}, rounds, warmup)
    result = {f"{label} ms": 1e3 * statistics.median(t) for label, t in times.items()}
    for kind in ("forward", "train"):
        ratios = [k / o for k, o in zip(times[f"keras {kind}"], times[f"ours {kind}"], strict=True)]
        result[f"{kind} keras/ours"] = statistics.median(ratios)
    return result


def benchmark_decoders(
    batch: int,
    source_length: int,
    target_length: int,
    dim: int,
    units: int,
    rounds: int,
    warmup: int,
    decoders: dict[str, Callable[[int], keras.layers.Layer]] | None = None,
) -> dict[str, dict[str, float | str]]:
    """Microseconds per target token of a teacher-forced train step, per decoder and jit flag.

    Values are floats, or a string "n/a (reason)" where building or compiling the step failed.
    """
    decoders = DECODERS if decoders is None else decoders
    rng = np.random.default_rng(1)
    targets = tf.constant(rng.normal(size=(batch, target_length, dim)), tf.float32)
    memory = tf.constant(rng.normal(size=(batch, source_length, 2 * units)), tf.float32)
    steps, results = {}, {}
    for name, make in decoders.items():
        results[name] = {}
        for jit in (False, True):
            label = "jit" if jit else "no jit"
            try:
                decoder = make(units)
                decoder(targets, memory)
                step = make_train_step(
                    lambda y, decoder=decoder: decoder(y, memory),
                    decoder.trainable_variables,
                    jit_compile=jit,
                )
                _ = float(step(targets))  # traces (and compiles under XLA)
            except Exception as error:  # noqa: BLE001 - any build/compile failure is reported
                # XLA's cause is the line naming it (e.g. "XLA compilation requires a fixed
                # tensor list size", from the gradient of the scan loop); otherwise the last line.
                lines = [line.strip() for line in str(error).splitlines() if line.strip()]
                causes = [
                    line
                    for line in lines
                    if "xla" in line.lower() and "conversion failed" not in line.lower()
                ]
                reason = (causes or lines[-1:] or [""])[0][:100]
                results[name][label] = f"n/a ({type(error).__name__}: {reason})"
                continue
            steps[(name, label)] = lambda step=step: step(targets)
    times = time_interleaved(steps, rounds, warmup)
    tokens = batch * target_length
    for (name, label), t in times.items():
        results[name][label] = 1e6 * statistics.median(t) / tokens
    return results


def format_encoder_table(name: str, cell: str, shape: tuple, result: dict[str, float]) -> str:
    batch, length, dim, units = shape
    lines = [f"(a) {name} {cell}, B={batch} T={length} d={dim} units={units}"]
    lines += [f"    {k:<22} {v:>10.2f}" for k, v in result.items() if k.endswith("ms")]
    lines += [f"    {k:<22} {v:>10.2f}x" for k, v in result.items() if not k.endswith("ms")]
    return "\n".join(lines)


def format_decoder_table(shape: tuple, results: dict[str, dict[str, float | str]]) -> str:
    batch, source_length, target_length, dim, units = shape
    lines = [
        f"(b) decoder train step, us per target token, B={batch} T_x={source_length} "
        f"T_y={target_length} d_y={dim} units={units}",
        f"    {'decoder':<18} {'no jit':>12} {'jit':>12}",
    ]
    for name, row in results.items():
        cells = [
            f"{row[k]:>12.1f}" if isinstance(row.get(k), float) else f"  {row.get(k)}"
            for k in ("no jit", "jit")
        ]
        lines.append(f"    {name:<18} {' '.join(cells)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a few minutes)")
    args = parser.parse_args(argv)
    rounds, warmup = (5, 2) if args.quick else (15, 3)
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {os.cpu_count()} CPUs")
    for name in ("bidirectional", "deep"):
        for cell in ("lstm", "gru"):
            result = benchmark_encoder(name, cell, *ENCODER_SHAPE, rounds=rounds, warmup=warmup)
            print(format_encoder_table(name, cell, ENCODER_SHAPE, result), flush=True)
    results = benchmark_decoders(*DECODER_SHAPE, rounds=max(3, rounds // 2), warmup=1)
    print(format_decoder_table(DECODER_SHAPE, results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
