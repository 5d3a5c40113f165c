"""Transformer training problems measured: warm-up, pre-LN vs post-LN, label smoothing, clipping.

    python examples/transformer_training.py --out runs/transformer_training [--steps 400]
        [--num-layers 4] [--d-model 64] [--learning-rate 3e-3] [--warmup-steps 50] [--quick]

Trains the same small Transformer translator (keras_attn.models.transformer_translator) on the
synthetic Spanish→English corpus once per arm, for a fixed number of steps, with one seed (same
initial weights for every post-LN arm, same batches for every arm) and the same peak learning rate:

    post-nowarm         post-LN, no warm-up: cosine decay from the peak at step 0, clipped
    post-warm           post-LN, linear warm-up then the same cosine decay (the CLI default)
    post-isqrt          post-LN, inverse-sqrt warm-up (Vaswani et al. eq. 3), clipped
    pre-nowarm          pre-LN, no warm-up, clipped
    post-isqrt-ls       post-isqrt + label smoothing 0.1
    post-isqrt-noclip   post-isqrt without gradient clipping
    post-nowarm-noclip  post-nowarm without gradient clipping

post-nowarm vs post-warm isolates the warm-up (the decay after it is the same cosine);
post-nowarm vs pre-nowarm isolates the block layout.

Each arm uses the library's own optimizer (`keras_attn.training.trainer.build_optimizer`: Adam,
the selected schedule, global-norm clipping) and loss (`masked_cross_entropy` with
`label_smoothing`). It records per step the plain (unsmoothed) training cross-entropy, the
gradient's global norm before clipping and the learning rate, and at the end the teacher-forced
cross-entropy and token accuracy on dev pairs. It writes, under --out:

    transformer_training.csv   one row per arm and step (arm, step, nll, loss, grad_norm, lr)
    transformer_training.md    a table per arm (nll at 1/4, 1/2 and the end, dev nll/accuracy, …)
    transformer_training.png   the curves: training cross-entropy, gradient norm, learning rate

An arm whose loss becomes NaN or infinite stops there and is reported as diverged.
`--quick` shrinks everything for a run of about a minute.

References:
    Vaswani et al., 2017, "Attention is all you need", arXiv:1706.03762.
    Xiong et al., 2020, "On layer normalization in the Transformer architecture",
    arXiv:2002.04745.
    Szegedy et al., 2016, "Rethinking the Inception architecture for computer vision" (label
    smoothing), arXiv:1512.00567.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_attn.models import transformer_translator
from keras_attn.text import synthetic
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import build_wordpiece_vocab
from keras_attn.training.data import BatchPlan, pad, tokenize_pairs
from keras_attn.training.metrics import masked_cross_entropy, masked_token_accuracy
from keras_attn.training.trainer import TrainConfig, build_optimizer

WARMUPS = {
    "none": ("cosine", "no warm-up"),
    "linear": ("cosine", "linear warm-up + cosine"),
    "inverse-sqrt": ("inverse-sqrt", "inverse-sqrt warm-up"),
}


@dataclass(frozen=True)
class Arm:
    name: str
    normalize_first: bool
    warmup: str  # a WARMUPS key
    label_smoothing: bool = False
    clipping: bool = True

    def describe(self) -> str:
        return (
            f"{'pre' if self.normalize_first else 'post'}-LN, {WARMUPS[self.warmup][1]}"
            f"{', label smoothing' if self.label_smoothing else ''}"
            f"{'' if self.clipping else ', no clipping'}"
        )


ARMS = {
    arm.name: arm
    for arm in (
        Arm("post-nowarm", normalize_first=False, warmup="none"),
        Arm("post-warm", normalize_first=False, warmup="linear"),
        Arm("post-isqrt", normalize_first=False, warmup="inverse-sqrt"),
        Arm("pre-nowarm", normalize_first=True, warmup="none"),
        Arm("post-isqrt-ls", normalize_first=False, warmup="inverse-sqrt", label_smoothing=True),
        Arm("post-isqrt-noclip", normalize_first=False, warmup="inverse-sqrt", clipping=False),
        Arm("post-nowarm-noclip", normalize_first=False, warmup="none", clipping=False),
    )
}


def arm_config(arm: Arm, args: argparse.Namespace) -> TrainConfig:
    """The `keras-attn train` configuration of one arm: the shared settings + the arm's own."""
    return TrainConfig(
        model="transformer",
        steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        schedule=WARMUPS[arm.warmup][0],
        warmup_steps=0 if arm.warmup == "none" else args.warmup_steps,
        clipnorm=args.clipnorm if arm.clipping else 0.0,
        label_smoothing=args.label_smoothing if arm.label_smoothing else 0.0,
        mixed_precision="float32",
        seed=args.seed,
        options={
            "num_layers": args.num_layers,
            "d_model": args.d_model,
            "num_heads": args.num_heads,
            "ff_dim": args.ff_dim,
            "dropout": args.dropout,
            "normalize_first": arm.normalize_first,
        },
    )


def load_data(args: argparse.Namespace):
    """Tokenized training pairs (a BatchPlan), dev batches, and the two vocabulary sizes."""
    splits = synthetic.load_splits(
        seed=args.seed, num_pairs=args.train_pairs + args.dev_pairs, dev_size=args.dev_pairs,
        test_size=0,
    )  # fmt: skip
    train_pairs = splits["train"]
    tokenizers = [
        WordPieceTokenizer(build_wordpiece_vocab([pair[side] for pair in train_pairs], args.vocab))
        for side in (0, 1)
    ]
    sources, targets = tokenize_pairs(train_pairs, *tokenizers, args.max_length)
    plan = BatchPlan(sources, targets, args.batch_size, seed=args.seed)
    dev_sources, dev_targets = tokenize_pairs(splits["dev"], *tokenizers, args.max_length)
    dev = []
    for begin in range(0, len(dev_sources), args.batch_size):
        targets_padded = pad(dev_targets[begin : begin + args.batch_size])
        features = {
            "source_ids": pad(dev_sources[begin : begin + args.batch_size]),
            "target_ids": targets_padded[:, :-1],
        }
        dev.append((features, targets_padded[:, 1:]))
    return plan, dev, tokenizers[0].vocab_size, tokenizers[1].vocab_size


def train_arm(arm: Arm, args, plan: BatchPlan, dev, vocab_sizes) -> dict:
    """Train one arm from the shared seed; per-step curves and final dev numbers."""
    config = arm_config(arm, args)
    config.validate()
    keras.utils.set_random_seed(args.seed)
    model = transformer_translator(*vocab_sizes, **config.model_hyperparameters())
    optimizer = build_optimizer(config, "float32")
    optimizer.build(model.trainable_variables)
    ids = tf.TensorSpec((None, None), tf.int32)

    @tf.function(input_signature=[{"source_ids": ids, "target_ids": ids}, ids])
    def train_step(features, labels):
        learning_rate = optimizer.learning_rate  # the rate this update uses
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            loss = masked_cross_entropy(labels, logits, label_smoothing=config.label_smoothing)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(gradients, model.trainable_variables)  # clips inside when clipnorm > 0
        nll = masked_cross_entropy(labels, logits)
        return nll, loss, tf.linalg.global_norm(gradients), learning_rate

    @tf.function(input_signature=[{"source_ids": ids, "target_ids": ids}, ids])
    def dev_step(features, labels):
        logits = model(features, training=False)
        tokens = tf.reduce_sum(tf.cast(labels != 0, tf.float32))
        return (
            masked_cross_entropy(labels, logits) * tokens,
            masked_token_accuracy(labels, logits) * tokens,
            tokens,
        )

    rows = []
    diverged_at = None
    started = time.perf_counter()
    for step in range(args.steps):
        features, labels = plan.batch(step)
        values = [float(v) for v in train_step(features, labels)]
        rows.append(dict(zip(("nll", "loss", "grad_norm", "lr"), values, strict=True)))
        if not all(math.isfinite(v) for v in values[:3]):
            diverged_at = step + 1
            break
    seconds = time.perf_counter() - started
    dev_nll = dev_accuracy = float("nan")
    if diverged_at is None:
        sums = np.sum([[float(v) for v in dev_step(*batch)] for batch in dev], axis=0)
        dev_nll, dev_accuracy = sums[0] / sums[2], sums[1] / sums[2]
    return {
        "arm": arm,
        "rows": rows,
        "diverged_at": diverged_at,
        "dev_nll": dev_nll,
        "dev_accuracy": dev_accuracy,
        "seconds": seconds,
    }


def window_mean(rows: list[dict], end: int, width: int) -> float:
    """Mean training cross-entropy over steps `end - width + 1 … end` (1-based); NaN if missing."""
    if end > len(rows):
        return float("nan")
    return float(np.mean([row["nll"] for row in rows[max(end - width, 0) : end]]))


def write_csv(results: list[dict], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["arm", "step", "nll", "loss", "grad_norm", "lr"])
        for result in results:
            for step, row in enumerate(result["rows"], start=1):
                writer.writerow(
                    [result["arm"].name, step]
                    + [f"{row[key]:.6g}" for key in ("nll", "loss", "grad_norm", "lr")]
                )


def table(results: list[dict], args: argparse.Namespace) -> str:
    """Markdown table: cross-entropy (mean over a window) at 1/4, 1/2 and the end, dev, norms."""
    width = max(args.steps // 20, 1)
    quarter, half = max(args.steps // 4, 1), max(args.steps // 2, 1)
    lines = [
        f"| arm | setting | train CE @{quarter} | @{half} | @{args.steps} | dev CE | "
        "dev token acc. | max ‖g‖ | steps with ‖g‖ > clip | s/step |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        rows, arm = result["rows"], result["arm"]
        norms = np.array([row["grad_norm"] for row in rows])
        status = (
            f"diverged at step {result['diverged_at']}"
            if result["diverged_at"]
            else f"{window_mean(rows, args.steps, width):.3f}"
        )
        lines.append(
            f"| {arm.name} | {arm.describe()} | {window_mean(rows, quarter, width):.3f} | "
            f"{window_mean(rows, half, width):.3f} | {status} | {result['dev_nll']:.3f} | "
            f"{result['dev_accuracy']:.1%} | {np.nanmax(norms):.2f} | "
            f"{np.mean(norms > args.clipnorm):.0%} | {result['seconds'] / len(rows):.3f} |"
        )
    return "\n".join(lines) + "\n"


def plot(results: list[dict], args: argparse.Namespace, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = max(args.steps // 40, 1)
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for result in results:
        rows = result["rows"]
        steps = np.arange(1, len(rows) + 1)
        nll = np.array([row["nll"] for row in rows])
        smooth = np.convolve(nll, np.ones(width) / width, mode="valid")
        label = result["arm"].describe()
        (line,) = axes[0].plot(steps[width - 1 :], smooth, label=label)
        axes[1].plot(steps, [row["grad_norm"] for row in rows], color=line.get_color(), lw=0.7)
        axes[2].plot(steps, [row["lr"] for row in rows], color=line.get_color(), label=label)
    axes[0].set_title(f"training cross-entropy (mean of {width} steps)")
    axes[0].set_ylim(0, None)
    axes[1].set_title("gradient global norm before clipping")
    axes[1].set_yscale("log")
    axes[1].axhline(args.clipnorm, color="grey", ls="--", lw=0.8)
    axes[2].set_title("learning rate")
    for ax in axes:
        ax.set_xlabel("step")
    axes[0].legend(fontsize=8)
    figure.suptitle(
        f"Transformer translator, {args.num_layers}+{args.num_layers} layers, "
        f"d_model={args.d_model}, peak lr {args.learning_rate:g}, batch {args.batch_size}, "
        f"seed {args.seed}"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="directory for the CSV, table and PNG")
    parser.add_argument("--arms", default=",".join(ARMS), help="comma-separated arm names")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--ff-dim", type=int, default=256)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="peak, every arm")
    parser.add_argument("--warmup-steps", type=int, default=50, help="warm-up arms")
    parser.add_argument("--label-smoothing", type=float, default=0.1, help="smoothing arm")
    parser.add_argument("--clipnorm", type=float, default=1.0, help="clipped arms")
    parser.add_argument("--train-pairs", type=int, default=28000)
    parser.add_argument("--dev-pairs", type=int, default=500)
    parser.add_argument("--vocab", type=int, default=1000, help="WordPiece size per side")
    parser.add_argument("--max-length", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="small sizes, about a minute")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.num_layers, args.d_model, args.ff_dim = 120, 2, 32, 64
        args.warmup_steps, args.train_pairs, args.dev_pairs = 30, 4000, 128
    unknown = [name for name in args.arms.split(",") if name not in ARMS]
    if unknown:
        parser.error(f"unknown arm {unknown[0]!r}; choose from {', '.join(ARMS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plan, dev, *vocab_sizes = load_data(args)
    print(
        f"{len(plan.sources)} training pairs, {sum(len(b[1]) for b in dev)} dev pairs, "
        f"vocabularies {vocab_sizes[0]}/{vocab_sizes[1]}"
    )
    results = []
    for name in args.arms.split(","):
        try:
            result = train_arm(ARMS[name], args, plan, dev, vocab_sizes)
        except ValueError as error:  # a setting TrainConfig rejects, e.g. --warmup-steps 0
            print(f"error: {error}", file=sys.stderr)
            return 2
        results.append(result)
        rows = result["rows"]
        print(
            f"{name:20s} final train CE {rows[-1]['nll']:.3f}, dev CE {result['dev_nll']:.3f}, "
            f"dev acc {result['dev_accuracy']:.1%}, {result['seconds']:.0f}s"
            + (f", diverged at step {result['diverged_at']}" if result["diverged_at"] else "")
        )
    write_csv(results, out / "transformer_training.csv")
    (out / "transformer_training.md").write_text(table(results, args))
    plot(results, args, out / "transformer_training.png")
    print(table(results, args))
    print(f"wrote {out}/transformer_training.{{csv,md,png}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
