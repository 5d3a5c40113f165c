"""Score a dev split: a translator through the exported path (BLEU), an LM by perplexity."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_attn.training.data import pad
from keras_attn.training.metrics import corpus_bleu, exact_match, rouge


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
    """BLEU, exact match and ROUGE (`keras_attn.training.metrics.rouge`: a translator trained on
    `document TAB summary` pairs is a summariser) of `translator` on `(source, reference)` pairs.

    References go through `normalize` (the tokenizer's normalisation, e.g. lower-casing), which is
    the form the detokenizer produces.
    """
    sources = [source for source, _ in pairs]
    references = [normalize(reference) for _, reference in pairs]
    hypotheses = translate_all(translator, sources, batch_size)
    return {
        "bleu": corpus_bleu(hypotheses, references),
        "exact_match": exact_match(hypotheses, references),
        **rouge(hypotheses, references),
        "sentences": len(pairs),
        "hypotheses": hypotheses,
        "references": references,
    }


def evaluate_perplexity(
    model, sequences: Sequence[np.ndarray], batch_size: int = 256, pad_id: int = 0
) -> dict:
    """Per-token perplexity of a language model on START … END sequences.

        perplexity = exp( -(1/N) sum_i sum_{t>=1} log p(x_t^(i) | x_<t^(i)) )

    over the N predicted tokens (every token after START, END included), teacher-forced, in
    float32, dropout off. `model` maps token ids `(batch, T)` to logits `(batch, T, V)`.

    Returns:
        `{"perplexity", "cross_entropy" (nats per token), "tokens": N, "sentences"}`.
    """
    if not sequences:
        raise ValueError("No sequences to score")
    total, count = 0.0, 0
    for begin in range(0, len(sequences), batch_size):
        ids = pad(sequences[begin : begin + batch_size], pad_id)  # (batch, T)
        labels = ids[:, 1:]
        logits = model(ids[:, :-1], training=False)  # (batch, T - 1, V)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=tf.cast(logits, tf.float32)
        ).numpy()
        real = labels != pad_id
        total += float(losses[real].astype(np.float64).sum())
        count += int(real.sum())
    cross_entropy = total / count
    return {
        "perplexity": math.exp(cross_entropy),
        "cross_entropy": cross_entropy,
        "tokens": count,
        "sentences": len(sequences),
    }
