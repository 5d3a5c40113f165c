"""Plain NumPy versions of the papers' equations, the reference every numeric test compares to."""

from __future__ import annotations

import numpy as np


def softmax(scores: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis (Bahdanau et al., 2015, eq. 6); masked positions get 0."""
    scores = scores.astype(np.float64)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    shifted = scores - np.max(np.where(np.isfinite(scores), scores, -1e300), axis=-1, keepdims=True)
    exp = np.exp(shifted)
    if mask is not None:
        exp = np.where(mask, exp, 0.0)
    total = exp.sum(axis=-1, keepdims=True)
    return np.divide(exp, total, out=np.zeros_like(exp), where=total > 0)


def dot_score(q, k):
    return np.einsum("bqd,bkd->bqk", q, k)


def general_score(q, k, w):
    return np.einsum("bqi,ij,bkj->bqk", q, w, k)


def additive_score(q, k, w1, w2, v, b=None, act=np.tanh):
    """The additive score of Bahdanau et al., 2015: v^T act(W1 q + W2 k_i + b)."""
    hidden = (q @ w1)[:, :, None, :] + (k @ w2)[:, None, :, :]
    if b is not None:
        hidden = hidden + b
    return act(hidden) @ v


def concat_score(q, k, w, v, b=None, act=np.tanh):
    """v^T act(W [q; k_i] + b), materialising the concatenation."""
    tq, tk = q.shape[1], k.shape[1]
    pairs = np.concatenate(
        [np.repeat(q[:, :, None, :], tk, axis=2), np.repeat(k[:, None, :, :], tq, axis=1)], axis=-1
    )
    hidden = pairs @ w
    if b is not None:
        hidden = hidden + b
    return act(hidden) @ v


def attention(scores, values, mask=None):
    """Eqs. 2.19–2.20: alpha = softmax(scores), c = sum_i alpha_i v_i."""
    weights = softmax(scores, mask)
    return np.einsum("bqk,bkd->bqd", weights, values), weights


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_step(x, h, c, kernel, recurrent_kernel, bias):
    """Eqs. 2.8–2.11, candidate with h^(t-1) as DESIGN.md corrects; Keras gate order i, f, c, o."""
    z = x @ kernel + h @ recurrent_kernel + bias
    i, f, g, o = np.split(z, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    h = sigmoid(o) * np.tanh(c)
    return h, c


def lstm_sequence(x, mask, kernel, recurrent_kernel, bias, reverse=False):
    """Run an LSTM over (batch, T, d), skipping masked steps (state carried through)."""
    batch, steps, _ = x.shape
    units = recurrent_kernel.shape[0]
    h = np.zeros((batch, units))
    c = np.zeros((batch, units))
    outputs = np.zeros((batch, steps, units))
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        h_new, c_new = lstm_step(x[:, t], h, c, kernel, recurrent_kernel, bias)
        keep = mask[:, t : t + 1]
        h = np.where(keep, h_new, h)
        c = np.where(keep, c_new, c)
        outputs[:, t] = np.where(keep, h_new, 0.0)
    return outputs, h, c


def elman_step(x, h, kernel, recurrent_kernel, bias, act=np.tanh):
    """The Elman (1990) step: h^(t) = act(x^(t) W_x + h^(t-1) W_h + b)."""
    return act(x @ kernel + h @ recurrent_kernel + bias)


def output_projection(h, output_kernel, output_bias, act=None):
    """The output layer of an Elman network: o^(t) = act(h^(t) W_out + b_out)."""
    out = h @ output_kernel + output_bias
    return out if act is None else act(out)


def masked_recurrence(x, mask, step, state, reverse=False):
    """Run `step(x_t, state) -> (output_t, new_state)` over (batch, T, d) as Keras' RNN does.

    Padded steps keep the state and repeat the previous output (Keras'
    `zero_output_for_mask=False`); returns `(outputs (batch, T, q), final state)`.
    """
    batch, steps, _ = x.shape
    outputs, previous = [None] * steps, None
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        output, new_state = step(x[:, t], state)
        keep = mask[:, t : t + 1]
        state = np.where(keep, new_state, state)
        if previous is None:
            previous = np.zeros_like(output)
        previous = np.where(keep, output, previous)
        outputs[t] = previous
    return np.stack(outputs, axis=1), state


def ntm_cosine(key, memory, eps=1e-16):
    """Graves et al. 2014 eq. 6, K[k, M(i)], with `eps` under both norms' square roots."""
    dot = np.einsum("bnm,bm->bn", memory, key)
    key_norm = np.sqrt((key**2).sum(-1, keepdims=True) + eps)
    return dot / (key_norm * np.sqrt((memory**2).sum(-1) + eps))


def ntm_content_weights(key, beta, memory):
    """Eq. 5: softmax_i(beta K[k, M(i)]), (batch, N)."""
    return softmax(beta * ntm_cosine(key, memory))


def ntm_interpolate(content, gate, previous):
    """Eq. 7: g w^c + (1 - g) w^(t-1)."""
    return gate * content + (1 - gate) * previous


def ntm_shift(weights, shifts):
    """Eq. 8 written as the loop: w~(i) = sum_{j=-r..r} s(j) w((i - j) mod N)."""
    n, r = weights.shape[-1], (shifts.shape[-1] - 1) // 2
    out = np.zeros_like(weights, dtype=np.float64)
    for i in range(n):
        for j in range(-r, r + 1):
            out[:, i] += shifts[:, j + r] * weights[:, (i - j) % n]
    return out


def ntm_sharpen(weights, gamma):
    """Eq. 9: w~^gamma / sum w~^gamma."""
    powered = weights.astype(np.float64) ** gamma
    return powered / powered.sum(-1, keepdims=True)


def ntm_read(weights, memory):
    """Eq. 2: r = sum_i w(i) M(i)."""
    return np.einsum("bn,bnm->bm", weights, memory)


def ntm_write(memory, weights, erase, add):
    """Eqs. 3-4, one head after the other's erasure, then all additions: (batch, W, ...) heads."""
    erased = memory.astype(np.float64)
    for h in range(weights.shape[1]):
        erased = erased * (1 - weights[:, h, :, None] * erase[:, h, None, :])
    return erased + np.einsum("bhn,bhm->bnm", weights, add)


def ntm_step(x, state, params):
    """One NTMCell step from the paper's equations; `state` = (h, c, memory (b, N, M_w),
    reads (b, R*M_w), weights (b, R+W, N)); `params` holds the weights and sizes by name."""
    h, c, memory, reads, previous = state
    width, r = params["memory_width"], params["shift_range"]
    num_read, num_write = params["num_read_heads"], params["num_write_heads"]
    h, c = lstm_step(
        np.concatenate([x, reads], -1),
        h,
        c,
        params["controller_kernel"],
        params["controller_recurrent_kernel"],
        params["controller_bias"],
    )
    p = h @ params["head_kernel"] + params["head_bias"]
    if params["clip_value"] is not None:
        p = np.clip(p, -params["clip_value"], params["clip_value"])
    size = width + 2 * r + 4
    weights = []
    for head in range(num_read + num_write):
        q = p[:, head * size : (head + 1) * size]
        key = q[:, :width]
        beta = np.log1p(np.exp(q[:, width : width + 1]))
        gate = sigmoid(q[:, width + 1 : width + 2])
        shifts = softmax(q[:, width + 2 : width + 3 + 2 * r])
        gamma = 1 + np.log1p(np.exp(q[:, width + 3 + 2 * r :]))
        w = ntm_content_weights(key, beta, memory)
        w = ntm_interpolate(w, gate, previous[:, head])
        w = ntm_shift(w, shifts)
        weights.append(ntm_sharpen(w, gamma))
    weights = np.stack(weights, 1)
    erase_add = p[:, (num_read + num_write) * size :].reshape(-1, num_write, 2, width)
    memory = ntm_write(
        memory, weights[:, num_read:], sigmoid(erase_add[:, :, 0]), np.tanh(erase_add[:, :, 1])
    )
    reads = np.concatenate([ntm_read(weights[:, j], memory) for j in range(num_read)], -1)
    output = np.concatenate([h, reads], -1)
    if "output_kernel" in params:
        output = output @ params["output_kernel"] + params["output_bias"]
    return output, (h, c, memory, reads, weights)


def parallel_co_attention(regions, words, mask, w_b, w_v, w_q, w_hv, w_hq):
    """Lu et al.'s (2016) parallel co-attention, eq. 3-4, with the affinity `C = V W_b Qᵀ`
    normalised by a softmax each way (over the real words, over the regions) before it carries
    features across. `regions` `(batch, L, d_v)`, `words` `(batch, T, d_q)`, `mask` bool
    `(batch, T)`; returns `(v_hat, q_hat, a_v, a_q)`."""
    affinity = np.einsum("bld,de,bte->blt", regions, w_b, words)  # C (batch, L, T)
    pairs = np.broadcast_to(mask[:, None, :], affinity.shape)
    a_v_words = softmax(affinity, pairs)  # each region over the words
    a_q_regions = softmax(affinity.transpose(0, 2, 1), pairs.transpose(0, 2, 1))  # (b, T, L)
    region_map = np.tanh(regions @ w_v + (a_v_words @ words) @ w_q)  # H^v (batch, L, k)
    word_map = np.tanh(words @ w_q + (a_q_regions @ regions) @ w_v)  # H^q (batch, T, k)
    a_v = softmax(region_map @ w_hv)  # (batch, L)
    a_q = softmax(word_map @ w_hq, mask)  # (batch, T)
    v_hat = np.einsum("bl,bld->bd", a_v, regions)
    q_hat = np.einsum("bt,btd->bd", a_q, words)
    return v_hat, q_hat, a_v, a_q
