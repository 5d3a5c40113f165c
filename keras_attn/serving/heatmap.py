"""A text heatmap of an attention alignment, for a terminal (`keras-attn translate --alignment`).

One row per target token, one column per source token, each cell one of five shades of the
weight the target token gave the source token: `·` below 0.2, then `░`, `▒`, `▓` in steps of 0.2
and `█` from 0.8 (a row of a soft alignment sums to 1, so it holds at most one `█` and one `▓`).
Columns are as wide as their source token, so the header reads as the source sentence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SHADES = "·░▒▓█"
LEGEND = "· <0.2  ░ <0.4  ▒ <0.6  ▓ <0.8  █ >=0.8"


def shade(weight: float) -> str:
    """The character of `weight` in [0, 1]: one of `SHADES`, in bins of 0.2 (NaN reads as 0)."""
    level = int(np.clip(np.nan_to_num(weight) * len(SHADES), 0, len(SHADES) - 1))
    return SHADES[level]


def text_heatmap(
    source_tokens: Sequence[str], target_tokens: Sequence[str], alignment: np.ndarray
) -> str:
    """The alignment of one sentence as lines of text (no trailing newline).

    Empty tokens are padding: their rows and columns are left out, as are the alignment's
    entries beyond the tokens given.

    Args:
        source_tokens: the source tokens, as served in `source_tokens` (padded with "").
        target_tokens: the target tokens, as served in `tokens` (padded with "").
        alignment: `(T, S)` weights, target by source, as served in `alignment`.

    Raises:
        ValueError: `alignment` is not 2-D or smaller than the non-empty tokens.

    Example:

    >>> print(text_heatmap(["el", "gato"], ["the", "cat"], np.array([[0.9, 0.1], [0.3, 0.7]])))
        el gato
    the █  ·
    cat ░  ▓
    """
    alignment = np.asarray(alignment, dtype=np.float64)
    rows = [i for i, token in enumerate(target_tokens) if token]
    columns = [j for j, token in enumerate(source_tokens) if token]
    if alignment.ndim != 2 or (
        (rows and rows[-1] >= alignment.shape[0]) or (columns and columns[-1] >= alignment.shape[1])
    ):
        raise ValueError(
            f"Expected a (target, source) alignment covering {len(target_tokens)} target and "
            f"{len(source_tokens)} source tokens. Received: shape {alignment.shape}"
        )
    label = max((len(target_tokens[i]) for i in rows), default=0)
    widths = [len(source_tokens[j]) for j in columns]
    header = " ".join(source_tokens[j] for j in columns)
    lines = [(" " * label + " " + header).rstrip()]
    for i in rows:
        cells = " ".join(
            shade(alignment[i, j]).ljust(width) for j, width in zip(columns, widths, strict=True)
        )
        lines.append((target_tokens[i].ljust(label) + " " + cells).rstrip())
    return "\n".join(lines)
