"""Parallel corpora by name: one registry from corpus name to loader."""

from __future__ import annotations

from collections.abc import Callable

from keras_attn.text import synthetic

__all__ = ["load_corpus"]

Splits = dict[str, list[tuple[str, str]]]


def _load_synthetic(seed: int) -> Splits:
    return synthetic.load_splits(seed=seed)


# Name → loader(seed) returning {"train", "dev", "test"} lists of (source, target) pairs.
_LOADERS: dict[str, Callable[[int], Splits]] = {
    "synthetic": _load_synthetic,
}


def load_corpus(name: str, seed: int = 0) -> Splits:
    """Loads a parallel corpus as train/dev/test splits of (source, target) pairs.

    Args:
        name: corpus name; `"synthetic"` is the generated Spanish→English corpus of
            `keras_attn.text.synthetic` (30,000 pairs: 28,000 train, 1,000 dev, 1,000 test).
        seed: seed for corpora that are generated or sampled.

    Returns:
        `{"train": [...], "dev": [...], "test": [...]}` of `(source, target)` string pairs.

    Raises:
        ValueError: if `name` is not a known corpus.

    Example:

    >>> splits = load_corpus("synthetic")
    >>> sorted(splits), len(splits["test"])
    (['dev', 'test', 'train'], 1000)
    """
    loader = _LOADERS.get(name)
    if loader is None:
        raise ValueError(f"Unknown corpus {name!r}. Expected one of: {', '.join(_LOADERS)}")
    return loader(seed)
