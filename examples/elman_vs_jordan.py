"""Elman (hidden state fed back) vs Jordan (output fed back) on delayed recall.

    python examples/elman_vs_jordan.py [--steps 300] [--delay 2] [--units 32] [--seed 0]

The task needs memory beyond the current output: at step t the network must output the symbol
it read at step t - delay (a random string of 4 symbols, one-hot). An Elman network
(`keras_attn.layers.ElmanRNN`; Elman, 1990) can keep the last `delay` symbols in its
hidden state. A Jordan network (`keras_attn.layers.JordanRNN`; Jordan, 1986) only sees its own
previous output o^(t-1), a softmax over the 4 symbols trained to predict the symbol of step
t - 1 - delay: the symbols read since then must survive in that prediction, which training pushes
towards one-hot. Both networks have the same hidden size, outputs and training budget; the
script prints the per-step accuracy of each (on steps t >= delay) and chance level.

References:
    Elman, 1990, "Finding structure in time", Cognitive Science 14(2).
    Jordan, 1986, "Serial order: a parallel distributed processing approach", ICS report 8604.
"""

from __future__ import annotations

import argparse
import time

import keras
import numpy as np

from keras_attn.layers import ElmanRNN, JordanRNN

SYMBOLS = 4
LENGTH = 12


def make_batch(
    rng: np.random.Generator, batch_size: int, delay: int
) -> tuple[np.ndarray, np.ndarray]:
    """One-hot inputs (batch, LENGTH, SYMBOLS) and targets y_t = x_{t-delay} (0 before)."""
    symbols = rng.integers(0, SYMBOLS, size=(batch_size, LENGTH))
    targets = np.zeros_like(symbols)
    targets[:, delay:] = symbols[:, :-delay]
    return np.eye(SYMBOLS, dtype="float32")[symbols], targets.astype("int32")


def build_model(kind: str, units: int) -> keras.Model:
    layer_cls = {"elman": ElmanRNN, "jordan": JordanRNN}[kind]
    inputs = keras.Input((LENGTH, SYMBOLS))
    # Both predict o^(t) = softmax(h^(t) W_out + b_out); only the fed-back state differs
    # (h^(t) for Elman, the prediction o^(t) for Jordan).
    probabilities = layer_cls(
        units,
        output_units=SYMBOLS,
        output_activation="softmax",
        return_sequences=True,
        name=kind,
    )(inputs)
    return keras.Model(inputs, probabilities)


def train_one(kind: str, steps: int, delay: int, units: int, seed: int = 0) -> dict:
    keras.utils.set_random_seed(seed)
    model = build_model(kind, units)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(),
    )
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    for _ in range(steps):
        inputs, targets = make_batch(rng, 64, delay)
        model.train_on_batch(inputs, targets)
    inputs, targets = make_batch(np.random.default_rng(seed + 1), 512, delay)
    predictions = model.predict(inputs, verbose=0).argmax(-1)
    # Steps before `delay` have nothing to recall; score the others.
    accuracy = float(np.mean(predictions[:, delay:] == targets[:, delay:]))
    return {"accuracy": accuracy, "seconds": time.perf_counter() - started}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps per network")
    parser.add_argument("--delay", type=int, default=2, help="recall the symbol this far back")
    parser.add_argument("--units", type=int, default=32, help="hidden units of both networks")
    parser.add_argument("--seed", type=int, default=0, help="weights, training and test batches")
    args = parser.parse_args(argv)
    if not 1 <= args.delay < LENGTH:
        parser.error(f"--delay must be in [1, {LENGTH - 1}]. Received: {args.delay}")

    print(f"delayed recall: output x(t-{args.delay}), {SYMBOLS} symbols, chance {1 / SYMBOLS:.0%}")
    for kind in ("elman", "jordan"):
        result = train_one(kind, args.steps, args.delay, args.units, args.seed)
        print(
            f"{kind:>7}: accuracy {result['accuracy']:.1%} ({result['seconds']:.1f} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
