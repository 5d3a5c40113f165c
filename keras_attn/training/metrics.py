"""Translation and summary quality: BLEU (sacrebleu), ROUGE, exact match, and the padding-masked
token accuracy and cross-entropy of training."""

from __future__ import annotations

import re
from collections.abc import Sequence

import sacrebleu
import tensorflow as tf
from rouge_score import rouge_scorer


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """sacrebleu corpus BLEU (13a tokenization) of hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score)


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of hypotheses identical to their reference."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    if not references:
        return 0.0
    return sum(h == r for h, r in zip(hypotheses, references, strict=True)) / len(references)


# The scores `rouge` returns.
ROUGE_SCORES = ("rouge1", "rouge2", "rougeL")


def rouge_tokens(text: str) -> list[str]:
    """ROUGE's tokens of a text: lower-cased runs of letters and digits (accents kept)."""
    return re.findall(r"[^\W_]+", text.lower())


class _RougeTokenizer:
    """The tokenizer `rouge_score` calls: `rouge_tokens`."""

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return rouge_tokens(text)


def rouge(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L (Lin, 2004) of summaries against one reference each, by the
    `rouge-score` package (Google's reimplementation of ROUGE-1.5.5), on the tokens of
    `rouge_tokens` (its own tokenizer drops every letter outside a-z). For each pair:

        ROUGE-N = F1 of the clipped n-gram overlap: overlap = sum_g min(c_hyp(g), c_ref(g)),
                  precision = overlap / |n-grams of hyp|, recall = overlap / |n-grams of ref|
        ROUGE-L = F1 of the longest common subsequence: P = LCS / |hyp|, R = LCS / |ref|

    and each score is the mean over the pairs, in percent (the F-measures of the summarisation
    tables of Lewis et al., 2020 and Liu & Lapata, 2019).

    Returns:
        `{"rouge1", "rouge2", "rougeL"}`, each in [0, 100].

    Raises:
        ValueError: the lists differ in length, or are empty.
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    if not references:
        raise ValueError("ROUGE needs at least one summary")
    scorer = rouge_scorer.RougeScorer(list(ROUGE_SCORES), tokenizer=_RougeTokenizer())
    totals = dict.fromkeys(ROUGE_SCORES, 0.0)
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        scores = scorer.score(reference, hypothesis)  # (target, prediction)
        for name in ROUGE_SCORES:
            totals[name] += scores[name].fmeasure
    return {name: 100.0 * total / len(references) for name, total in totals.items()}


def masked_token_accuracy(labels, logits, pad_id: int = 0):
    """Share of non-padding positions whose argmax equals the label (a float32 scalar)."""
    labels = tf.cast(labels, tf.int32)
    predictions = tf.cast(tf.argmax(logits, axis=-1), tf.int32)
    mask = tf.cast(tf.not_equal(labels, pad_id), tf.float32)
    correct = tf.cast(tf.equal(predictions, labels), tf.float32) * mask
    return tf.math.divide_no_nan(tf.reduce_sum(correct), tf.reduce_sum(mask))


def masked_cross_entropy(labels, logits, pad_id: int = 0, label_smoothing: float = 0.0):
    """Mean token cross-entropy over non-padding positions, computed in float32.

    With label smoothing `eps` the target of a position with label `y` is
    `q = (1 - eps) · onehot(y) + eps / V` over all `V` classes, and its loss is

        -Σ_k q_k log p_k = (1 - eps) · (-log p_y) + eps · mean_k(-log p_k)

    (Szegedy et al., 2016, arXiv:1512.00567, section 7; Vaswani et al., 2017, section 5.4 use
    `eps = 0.1`). Positions whose label is `pad_id` count neither in the sum nor in the mean.
    `eps = 0` gives the plain cross-entropy exactly. The smoothed loss cannot fall below the
    entropy of `q`, so compare smoothed runs on the plain cross-entropy.
    """
    labels = tf.cast(labels, tf.int32)
    logits = tf.cast(logits, tf.float32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    if label_smoothing:
        uniform = -tf.reduce_mean(tf.nn.log_softmax(logits, axis=-1), axis=-1)
        losses = (1.0 - label_smoothing) * losses + label_smoothing * uniform
    mask = tf.cast(tf.not_equal(labels, pad_id), tf.float32)
    return tf.math.divide_no_nan(tf.reduce_sum(losses * mask), tf.reduce_sum(mask))
