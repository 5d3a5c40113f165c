"""Scripted step functions whose logits depend on the whole prefix, and a NumPy beam search."""

import numpy as np
from keras import ops

PAD, UNK, START, END = 0, 1, 2, 3
V = 6


def prefix_code(sentence, tokens):
    """The row of the table read after consuming `tokens` (START first): base-V digits."""
    code = sentence
    for token in tokens:
        code = code * V + token
    return code


def prefix_step(table, max_length):
    """A step function reading `table[code(prefix)]`, with a nested state that must be gathered.

    State: `t` (scalar), `prefix` {`code`: (batch,)} decides the logits; `history` is a tuple of
    one (batch, max_length + 1) array of consumed tokens from which `attention` (batch, V), the
    token counts of the consumed prefix normalised to sum 1, is computed. Wrong gathering of
    either shows in the scores or in the alignments.
    """
    table = ops.convert_to_tensor(table, "float32")

    def step(tokens, state):
        t = state["t"]
        code = state["prefix"]["code"] * V + tokens
        column = ops.one_hot(t, max_length + 1, dtype="int32")
        (history,) = state["history"]
        history = history + column[None, :] * tokens[:, None]
        consumed = ops.cast(ops.arange(max_length + 1) <= t, "float32")  # (max_length + 1,)
        counts = ops.sum(ops.one_hot(history, V) * consumed[None, :, None], axis=1)
        new_state = {
            "t": t + 1,
            "prefix": {"code": code},
            "history": (history,),
            "attention": counts / ops.sum(counts, -1, keepdims=True),
        }
        return ops.take(table, code, axis=0), new_state

    return step


def prefix_state(batch, max_length):
    return {
        "t": ops.convert_to_tensor(0, "int32"),
        "prefix": {"code": ops.arange(batch, dtype="int32")},
        "history": (ops.zeros((batch, max_length + 1), "int32"),),
        "attention": ops.zeros((batch, V)),
    }


def random_table(batch, max_length, seed, scale=2.0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=((batch + 1) * V**max_length, V)) * scale).astype("float32")


def log_softmax(x):
    x = np.asarray(x, np.float64)
    return x - np.log(np.exp(x - x.max()).sum()) - x.max()


def path_log_prob(table, sentence, ids):
    """log P(ids) under the prefix model, ids without padding (END included if produced)."""
    tokens = [START, *ids]
    return sum(
        log_softmax(table[prefix_code(sentence, tokens[: t + 1])])[ids[t]] for t in range(len(ids))
    )


def expected_alignment(ids, steps, max_length):
    """The `attention` rows the prefix model emits along `ids` (zero after the hypothesis)."""
    rows = np.zeros((max_length, V), np.float32)
    consumed = [START]
    for t in range(steps):
        counts = np.bincount(consumed, minlength=V)
        rows[t] = counts / counts.sum()
        consumed.append(ids[t])
    return rows


def lp(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def reference_beam_search(table, sentence, beam_size, alpha, max_length):
    """Plain NumPy beam search with the semantics of `keras_attn.decoding.beam_search`.

    Runs to `max_length` (no early stop). Returns hypotheses best first as (ids, log_prob,
    steps, finished).
    """
    beams = [((), 0.0, 0, False)]
    for _ in range(max_length):
        candidates = []
        for ids, log_prob, steps, finished in beams:
            if finished:
                candidates.append((log_prob / lp(steps, alpha), (*ids, PAD), log_prob, steps, True))
                continue
            step_log_probs = log_softmax(table[prefix_code(sentence, [START, *ids])])
            for token in range(V):
                if token in (PAD, START):
                    continue
                total = log_prob + step_log_probs[token]
                candidates.append(
                    (total / lp(steps + 1, alpha), (*ids, token), total, steps + 1, token == END)
                )
        candidates.sort(key=lambda c: -c[0])
        beams = [(ids, total, steps, done) for _, ids, total, steps, done in candidates[:beam_size]]
    return beams
