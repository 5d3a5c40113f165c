"""Translate a split in-process through the exported path and score it."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from keras_attn.training.metrics import corpus_bleu, exact_match


def translate_all(translator, sentences: Sequence[str], batch_size: int = 256) -> list[str]:
    """Run `translator.translate` over `sentences` in batches; returns the translations."""
    outputs: list[str] = []
    for begin in range(0, len(sentences), batch_size):
        batch = tf.constant(list(sentences[begin : begin + batch_size]), tf.string)
        result = translator.translate(batch)["translation"].numpy()
        outputs.extend(t.decode("utf-8") for t in result)
    return outputs


def evaluate_pairs(
    translator, pairs: Sequence[tuple[str, str]], normalize, batch_size: int = 256
) -> dict:
    """BLEU and exact match of `translator` on `(source, reference)` pairs.

    References go through `normalize` (the tokenizer's normalisation, e.g. lower-casing), which is
    the form the detokenizer produces.
    """
    sources = [source for source, _ in pairs]
    references = [normalize(reference) for _, reference in pairs]
    hypotheses = translate_all(translator, sources, batch_size)
    return {
        "bleu": corpus_bleu(hypotheses, references),
        "exact_match": exact_match(hypotheses, references),
        "sentences": len(pairs),
        "hypotheses": hypotheses,
        "references": references,
    }
