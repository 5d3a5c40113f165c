"""Every score × distribution of the catalog on one generated task, with alignment heatmaps.

    python examples/attention_zoo.py --out zoo [--steps 300] [--scores dot general]
                                     [--distributions softmax sparsemax] [--seed 0]

The task has a known alignment: output position j must copy input token `T - 1 - j` (reverse a
random digit string). Each model is the same tiny network — embedded input → bidirectional GRU →
`keras_attn.layers.Attention(score, distribution)` queried by learned output-position embeddings →
Dense — so the only thing that changes between runs is the attention. For every combination the
script prints the sequence accuracy and the share of attention mass on the correct source token,
and writes `zoo/<score>-<distribution>.png` plus a grid `zoo/alignments.png`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import keras
import numpy as np

import keras_attn
from keras_attn.layers import Attention, BidirectionalEncoder

VOCAB = 12  # 0 = padding, 1..11 = symbols
LENGTH = 8
# Constructor arguments a score needs beyond its defaults.
SCORE_ARGUMENTS = {"location": {"max_length": LENGTH}}


def make_batch(rng: np.random.Generator, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    source = rng.integers(1, VOCAB, size=(batch_size, LENGTH)).astype("int32")
    return source, source[:, ::-1].copy()


def build_model(score: str, distribution: str, units: int = 32) -> keras.Model:
    source = keras.Input((LENGTH,), dtype="int32", name="source")
    embedded = keras.layers.Embedding(VOCAB, units, mask_zero=True)(source)
    memory, _ = BidirectionalEncoder(units // 2, cell="gru")(embedded)
    positions = keras.ops.zeros_like(source) + keras.ops.arange(LENGTH, dtype="int32")
    queries = keras.layers.Embedding(LENGTH, units, name="output_positions")(positions)
    score_fn = keras_attn.scores.get(score, **SCORE_ARGUMENTS.get(score, {}))
    context, weights = Attention(score=score_fn, distribution=distribution, name="attention")(
        queries, memory, return_attention_scores=True
    )
    hidden = keras.layers.Dense(units, activation="relu")(
        keras.ops.concatenate([context, queries], -1)
    )
    logits = keras.layers.Dense(VOCAB, name="logits")(hidden)
    return keras.Model(source, {"logits": logits, "weights": weights})


def train_one(score: str, distribution: str, steps: int, seed: int = 0) -> dict:
    keras.utils.set_random_seed(seed)
    model = build_model(score, distribution)
    optimizer = keras.optimizers.Adam(3e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=optimizer, loss={"logits": loss_fn, "weights": None})
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    for _ in range(steps):
        source, target = make_batch(rng, 64)
        model.train_on_batch(source, {"logits": target})
    source, target = make_batch(np.random.default_rng(seed + 1), 256)
    outputs = model.predict(source, verbose=0)
    predictions = outputs["logits"].argmax(-1)
    weights = np.asarray(outputs["weights"], "float32")  # (batch, LENGTH, LENGTH)
    correct_source = np.arange(LENGTH)[::-1]
    return {
        "sequence_accuracy": float(np.mean(np.all(predictions == target, axis=-1))),
        "mass_on_aligned_token": float(weights[:, np.arange(LENGTH), correct_source].mean()),
        "seconds": time.perf_counter() - started,
        "example_source": source[0],
        "example_weights": weights[0],
    }


def plot(results: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = sorted({s for s, _ in results})
    dists = sorted({d for _, d in results})
    grid, axes = plt.subplots(
        len(scores), len(dists), figsize=(2.2 * len(dists), 2.2 * len(scores)), squeeze=False
    )
    for (score, dist), result in results.items():
        labels = [str(t) for t in result["example_source"]]
        single, ax_single = plt.subplots(figsize=(4, 4))
        for ax in (ax_single, axes[scores.index(score)][dists.index(dist)]):
            ax.imshow(result["example_weights"], cmap="viridis", vmin=0, vmax=1)
            ax.set_xticks(range(LENGTH), labels, fontsize=6)
            ax.set_yticks(range(LENGTH), [str(j) for j in range(LENGTH)], fontsize=6)
            ax.set_title(f"{score} × {dist}\nacc {result['sequence_accuracy']:.0%}", fontsize=7)
        ax_single.set_xlabel("source token")
        ax_single.set_ylabel("output position")
        single.tight_layout()
        single.savefig(out / f"{score}-{dist}.png", dpi=110)
        plt.close(single)
    grid.tight_layout()
    grid.savefig(out / "alignments.png", dpi=110)
    plt.close(grid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="zoo")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0, help="weights, training and test batches")
    parser.add_argument("--scores", nargs="*", default=sorted(keras_attn.scores.SCORES))
    parser.add_argument(
        "--distributions", nargs="*", default=sorted(keras_attn.distributions.DISTRIBUTIONS)
    )
    args = parser.parse_args(argv)
    for name in args.scores:
        keras_attn.scores.get(name, **SCORE_ARGUMENTS.get(name, {}))  # fail early on a bad name
    for name in args.distributions:
        keras_attn.distributions.get(name)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    results = {}
    print(f"{'score':>18} {'distribution':>12} {'seq. acc':>9} {'aligned mass':>12} {'s':>6}")
    for score in args.scores:
        for distribution in args.distributions:
            result = train_one(score, distribution, args.steps, args.seed)
            results[(score, distribution)] = result
            print(
                f"{score:>18} {distribution:>12} {result['sequence_accuracy']:>9.1%} "
                f"{result['mass_on_aligned_token']:>12.2f} {result['seconds']:>6.1f}",
                flush=True,
            )
    plot(results, out)
    print(f"heatmaps in {out}/ (alignments.png and one PNG per combination)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
