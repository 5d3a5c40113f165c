"""The copy task of Graves et al. (2014): a Neural Turing Machine against an LSTM.

    python examples/ntm_copy.py [--steps 2000] [--batch-size 32] [--memory-size 32]
                                [--memory-width 16] [--controller-units 64] [--models ntm lstm]

Each example is `T` random 8-bit vectors, then one step with the delimiter channel on, then `T`
blank steps during which the network must write the `T` vectors back in order. Inputs have 9
channels (8 bits + delimiter); the loss (sigmoid cross-entropy on the 8 bits) only counts the
recall steps. Every batch is padded to the longest training sequence, `2 * 10 + 1` steps, with
each row's own `T`; the padding comes after the recall, so a causal network never sees it.

Training lengths follow a curriculum (Zaremba and Sutskever, 2014): `T` is drawn uniformly from
`1..L`, and `L` starts at `--curriculum-start` and grows by one (up to 10) each time the bit
accuracy of the last 25 batches reaches 90%. Short copies teach the write/shift/read loop in few
steps; the long ones only have to reuse it. Adam with gradient norm clipped at 10 (Collier and
Beel, 2018) trains both models at `--learning-rate` (3e-3). The LSTM gets about as many
parameters as the NTM. After `--steps` updates each model is evaluated on `--eval-size` (512)
fresh sequences at the training lengths (1..10), at `T = 10` and at `T = 20` (never seen in
training); the script prints bit accuracy (share of recalled bits right) and sequence accuracy
(every bit right).

References:
    Graves et al., 2014, "Neural Turing machines", arXiv:1410.5401.
    Zaremba and Sutskever, 2014, "Learning to execute", arXiv:1410.4615.
    Collier and Beel, 2018, "Implementing neural Turing machines", arXiv:1807.08518.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

import keras
import numpy as np

from keras_attn.layers import NeuralTuringMachine

BITS = 8
MAX_TRAIN_LENGTH = 10


def make_batch(rng: np.random.Generator, lengths: np.ndarray, total_steps: int):
    """Copy-task inputs `(batch, total_steps, 9)`, targets `(batch, total_steps, 8)` and loss
    weights `(batch, total_steps)` (1 on each row's `T` recall steps, 0 elsewhere)."""
    batch = len(lengths)
    inputs = np.zeros((batch, total_steps, BITS + 1), "float32")
    targets = np.zeros((batch, total_steps, BITS), "float32")
    weights = np.zeros((batch, total_steps), "float32")
    for row, length in enumerate(lengths):
        bits = rng.integers(0, 2, size=(length, BITS)).astype("float32")
        inputs[row, :length, :BITS] = bits
        inputs[row, length, BITS] = 1.0  # the delimiter
        targets[row, length + 1 : 2 * length + 1] = bits
        weights[row, length + 1 : 2 * length + 1] = 1.0
    return inputs, targets, weights


def build_ntm(args: argparse.Namespace) -> keras.Model:
    inputs = keras.Input((None, BITS + 1))
    logits = NeuralTuringMachine(
        args.controller_units,
        memory_size=args.memory_size,
        memory_width=args.memory_width,
        output_units=BITS,
        name="ntm",
    )(inputs)
    return keras.Model(inputs, logits, name="ntm")


def build_lstm(units: int) -> keras.Model:
    inputs = keras.Input((None, BITS + 1))
    hidden = keras.layers.LSTM(units, return_sequences=True)(inputs)
    return keras.Model(inputs, keras.layers.Dense(BITS)(hidden), name="lstm")


def lstm_units_matching(parameters: int) -> int:
    """The LSTM width whose LSTM + Dense(8) parameter count is closest to `parameters`."""
    counts = {u: 4 * u * (BITS + 1 + u + 1) + u * BITS + BITS for u in range(1, 1024)}
    return min(counts, key=lambda u: abs(counts[u] - parameters))


def accuracies(model: keras.Model, rng: np.random.Generator, lengths: np.ndarray) -> tuple:
    """Bit accuracy and sequence accuracy on the recall steps of fresh sequences."""
    inputs, targets, weights = make_batch(rng, lengths, 2 * int(lengths.max()) + 1)
    predicted = model.predict(inputs, batch_size=128, verbose=0) > 0
    correct = (predicted == (targets > 0.5)).all(-1) | (weights == 0)  # (batch, steps)
    bit_right = ((predicted == (targets > 0.5)) * weights[..., None]).sum()
    return float(bit_right / (weights.sum() * BITS)), float(correct.all(-1).mean())


def train(model: keras.Model, args: argparse.Namespace, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    model.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate, global_clipnorm=10.0),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        weighted_metrics=[keras.metrics.BinaryAccuracy(threshold=0.0)],
        jit_compile=args.jit,
    )
    curriculum = args.curriculum_start
    recent = collections.deque(maxlen=25)
    started = time.perf_counter()
    for step in range(1, args.steps + 1):
        lengths = rng.integers(1, curriculum + 1, size=args.batch_size)
        inputs, targets, weights = make_batch(rng, lengths, 2 * MAX_TRAIN_LENGTH + 1)
        model.reset_metrics()  # the logged bit accuracy is this batch's alone
        logs = model.train_on_batch(inputs, targets, sample_weight=weights, return_dict=True)
        recent.append(logs["binary_accuracy"])
        if len(recent) == recent.maxlen and np.mean(recent) >= 0.9:
            if curriculum < MAX_TRAIN_LENGTH:
                curriculum += 1
                recent.clear()
        if step % args.log_every == 0:
            print(
                f"  {model.name} step {step}: loss {logs['loss']:.4f} "
                f"bit acc {logs['binary_accuracy']:.3f} curriculum 1..{curriculum} "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    seconds = time.perf_counter() - started
    eval_rng = np.random.default_rng(seed + 1)
    results = {"steps": args.steps, "seconds": seconds, "curriculum": curriculum}
    size = args.eval_size
    results["train"] = accuracies(model, eval_rng, eval_rng.integers(1, 11, size=size))
    results["T=10"] = accuracies(model, eval_rng, np.full(size, 10))
    results["T=20"] = accuracies(model, eval_rng, np.full(size, 20))
    return results


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="updates per model")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--controller-units", type=int, default=64)
    parser.add_argument("--memory-size", type=int, default=32, help="N (>= 21 for T = 20)")
    parser.add_argument("--memory-width", type=int, default=16, help="M")
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--curriculum-start", type=int, default=2, help="first max length")
    parser.add_argument("--models", nargs="+", default=["ntm", "lstm"], choices=["ntm", "lstm"])
    parser.add_argument("--eval-size", type=int, default=512, help="sequences per evaluation")
    parser.add_argument("--log-every", type=int, default=250)
    parser.add_argument(
        "--jit", action="store_true", help="XLA (compiling costs more than it saves here)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 1 <= args.curriculum_start <= MAX_TRAIN_LENGTH:
        parser.error(f"--curriculum-start must be in 1..10, got {args.curriculum_start}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    keras.utils.set_random_seed(args.seed)
    ntm = build_ntm(args)
    lstm = build_lstm(lstm_units_matching(ntm.count_params()))
    models = {"ntm": ntm, "lstm": lstm}
    table = {}
    for name in args.models:
        model = models[name]
        print(f"{name}: {model.count_params()} parameters, {args.steps} steps", flush=True)
        table[name] = train(model, args, args.seed)
    print()
    print(
        f"{'model':<6}{'params':>8}{'steps':>7}{'seconds':>9}{'curric.':>8}"
        f"{'bit@1-10':>10}{'seq@1-10':>10}{'bit@10':>8}{'seq@10':>8}{'bit@20':>8}{'seq@20':>8}"
    )
    for name, r in table.items():
        print(
            f"{name:<6}{models[name].count_params():>8}{r['steps']:>7}{r['seconds']:>9.1f}"
            f"{'1..' + str(r['curriculum']):>8}"
            f"{r['train'][0]:>10.3f}{r['train'][1]:>10.3f}{r['T=10'][0]:>8.3f}"
            f"{r['T=10'][1]:>8.3f}{r['T=20'][0]:>8.3f}{r['T=20'][1]:>8.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
