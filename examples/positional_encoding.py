"""The sinusoidal position encoding of 2000 positions with d_model = 500, drawn as an image.

    python examples/positional_encoding.py --out positional_encoding.png [--positions 2000]
                                          [--dim 500]

The matrix comes from `keras_attn.layers.SinusoidalPositionEncoding`:

    PE(pos, 2i) = sin(pos / 10000^(2i/d)),   PE(pos, 2i+1) = cos(pos / 10000^(2i/d))

Each pair of features (2i, 2i+1) turns at its own frequency; the wavelengths run geometrically
from 2π (left columns, fast stripes) to 10000·2π (right columns, nearly constant). The script
prints the matrix's size and range, checks it against the formula computed in NumPy, and prints
the property that makes the encoding useful: the dot product PE(pos)·PE(pos + k) depends on the
offset k only, not on pos (each frequency pair is rotated by the same angle whatever pos is).

References:
    Vaswani et al., 2017, "Attention is all you need", section 3.5, arXiv:1706.03762.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from keras_attn.layers import SinusoidalPositionEncoding


def encoding_matrix(positions: int, dim: int) -> np.ndarray:
    """The `(positions, dim)` encoding, computed by the layer (only the input's shape is read)."""
    layer = SinusoidalPositionEncoding()
    return np.asarray(layer(np.zeros((1, positions, dim), "float32")))[0]


def reference(positions: int, dim: int) -> np.ndarray:
    """The encoding formula in float64 NumPy."""
    pos = np.arange(positions)[:, None]
    pair = (np.arange(dim) // 2 * 2)[None] / dim  # 2i / d for features 2i and 2i + 1
    angle = pos / 10000.0**pair
    return np.where(np.arange(dim) % 2 == 0, np.sin(angle), np.cos(angle))


def plot(matrix: np.ndarray, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    positions, dim = matrix.shape
    figure, ax = plt.subplots(figsize=(7, 8))
    image = ax.imshow(matrix, cmap="RdBu", aspect="auto", vmin=-1, vmax=1, interpolation="none")
    ax.set_xlabel("embedding dimension")
    ax.set_ylabel("position")
    ax.set_title(f"{positions} positional encoding vectors, d_model = {dim}")
    figure.colorbar(image, ax=ax)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="positional_encoding.png")
    parser.add_argument("--positions", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=500)
    args = parser.parse_args(argv)
    if args.positions < 2 or args.dim < 2:
        parser.error(f"--positions and --dim must be >= 2; got {args.positions}, {args.dim}")

    matrix = encoding_matrix(args.positions, args.dim)
    error = np.abs(matrix - reference(args.positions, args.dim)).max()
    print(f"encoding matrix: {matrix.shape[0]} positions x {matrix.shape[1]} dimensions")
    print(f"values in [{matrix.min():.3f}, {matrix.max():.3f}]")
    # float32 angles up to ~2000 rad carry ~1e-4 absolute rounding, hence the size of this error
    print(f"max |layer - formula in float64| = {error:.2e}")
    longest = 2 * np.pi * 10000 ** (2 * ((args.dim - 1) // 2) / args.dim)
    print(f"wavelengths from 2π = {2 * np.pi:.2f} to {longest:.0f} positions")

    offset = min(10, args.positions - 1)
    starts = np.arange(0, args.positions - offset, max(1, (args.positions - offset) // 5))
    products = [float(matrix[p] @ matrix[p + offset]) for p in starts]
    print(
        f"PE(pos)·PE(pos+{offset}) for pos in {starts.tolist()}: "
        + ", ".join(f"{value:.3f}" for value in products)
    )

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(matrix, out)
    print(f"figure written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
