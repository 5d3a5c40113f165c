"""Performer (FAVOR+) multi-head attention: softmax attention approximated in linear time."""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import check_positive_int, serialize_arguments
from keras_attn.layers.attention.multi_head_attention import MultiHeadAttention
from keras_attn.ops.masking import apply_query_mask

# Stands in for log(0) inside exp(): exp(-1e9) is exactly 0 in float32, and the value itself is
# finite, so gradients through the masked branch stay finite.
_LOG_ZERO = -1e9


@keras_attn_export("keras_attn.layers.KernelAttention")
class KernelAttention(MultiHeadAttention):
    """Multi-head attention with Performer's positive orthogonal random features (FAVOR+).

    A `MultiHeadAttention` whose softmax attention is replaced by its random-feature estimate:
    the projections (weights, `project_query`, `project_key_value`) are `MultiHeadAttention`'s.
    Per head (shapes for one batch element), with `q_t = Q_t / key_dim^(1/4)`,
    `k_s = K_s / key_dim^(1/4)` and random features `w_1..w_m` (`m = num_features`, rows of
    `random_features` `(m, key_dim)`):

        phi(x) = exp(w_j^T x - ||x||^2 / 2)_j / sqrt(m)          (m,), positive
        E[phi(q_t)^T phi(k_s)] = exp(q_t^T k_s) = exp(Q_t^T K_s / sqrt(key_dim))
        non-causal:  H_t = phi(q_t)^T (sum_s phi(k_s) V_s^T) / phi(q_t)^T (sum_s phi(k_s))
        causal:      the same with both sums over s <= t (prefix sums along time)
        out = concat_i(H_i) W^O + b^O                            (T_q, d_out)

    Cost is O(T m d) instead of O(T_q T_k d): no `(T_q, T_k)` matrix is formed (the causal form
    keeps the `(T, m, value_dim)` prefix sums). The exponent is stabilised by subtracting a
    constant that cancels between numerator and denominator: per query its maximum over the
    features, and for keys the maximum over all real keys and features of the (batch, head)
    (non-causal) or the data-independent bound `max_j ||w_j||^2 / 2` of the exponent (causal, so
    that no output depends on later positions). The features and both sums are computed in
    float32.

    Random features: drawn in `build` (orthogonal blocks of Gaussian rows, rescaled to
    chi-distributed norms) from a `keras.random.SeedGenerator(seed)` and kept in the non-trainable
    weight `random_features`, so saving, loading and SavedModel export reproduce the outputs.
    Performer redraws them during training (a fixed draw's estimation bias would otherwise be
    fitted by the other weights): with `redraw_interval=n` every `n`-th training call draws new
    features before computing, counted by the non-trainable `training_calls`; `redraw_features()`
    redraws on demand. The draws are deterministic given `seed` (the generator's state is a
    weight too, saved with the model). Inference calls never redraw.

    Dropout (`dropout=p`): standard attention dropout drops entries of the `(T_q, T_k)` weight
    matrix, which the linear form never builds. The equivalent here drops keys: in training each
    key of each (batch, head) is kept with probability `1 - p` and scaled by `1 / (1 - p)` in the
    numerator `sum_s phi(k_s) V_s^T` only; the normaliser keeps every key. The output is then
    exactly `sum_s alpha_ts (m_s / (1 - p)) V_s` with the undropped weights `alpha` — Keras'
    `dropout(alpha) V` with one mask per key shared by all queries instead of one per (query,
    key) pair — and its expectation is the undropped output.

    Padded keys get `phi(k) = 0` and so contribute nothing; a query with no real key gets a zero
    context. With `return_attention_scores=True` the implied weights
    `phi(q_t)^T phi(k_s) / phi(q_t)^T sum_s phi(k_s)` `(batch, heads, T_q, T_k)` are formed as well
    (quadratic, for inspection only; before dropout).

    Incremental decoding (causal only): the causal output at `t` depends on the past only through
    the running sums `S = sum_{s<=t} phi(k_s) V_s^T` `(batch, heads, m, value_dim)` and
    `z = sum_{s<=t} phi(k_s)` `(batch, heads, m)`. Pass `cache=(S, z)` (`initial_cache(batch)`
    gives zeros) and the next `T` positions (one token or a chunk); the call returns
    `(output, cache)` with the sums advanced past them. Token by token this equals one causal pass
    over the whole sequence (the keys' stabiliser is data-independent, so sums from different
    calls add up). Do not redraw the features in the middle of a decoding.

    Args:
        num_heads: number of heads `h`.
        key_dim: size of each head's queries and keys.
        value_dim: size of each head's values; defaults to `key_dim`.
        num_features: number of random features `m`.
        causal: position `t` attends only to positions `<= t` (self-attention, `T_q == T_k`).
        use_bias: whether the four projections have biases.
        output_shape: size `d_out` of the output's last axis; defaults to the query's last axis.
        kernel_initializer: initializer of the four kernels.
        bias_initializer: initializer of the four biases.
        seed: seed of the random features and of the dropout masks (None draws a fresh one).
        redraw_interval: redraw the random features every this many training calls (a positive
            integer), or None never to redraw them automatically.
        dropout: probability of dropping a key from the numerator during training, in `[0, 1)`.

    Call arguments:
        query: `(batch, T_q, d_q)`.
        value: `(batch, T_k, d_v)`.
        key: `(batch, T_k, d_k)`; defaults to `value`.
        query_mask: bool `(batch, T_q)`; padded queries get a zero output. Filled from Keras
            masking when not given.
        value_mask: bool `(batch, T_k)`; padded keys contribute nothing. Filled from Keras masking
            when not given.
        return_attention_scores: also return the implied weights `(batch, heads, T_q, T_k)`
            (not with `cache`: past keys live only in the sums).
        training: enables dropout and the automatic feature redraw.
        cache: None, or the running sums `(S, z)` of the positions before `query` (causal
            self-attention only).

    Returns:
        `output` `(batch, T_q, d_out)`, or `(output, weights)` when `return_attention_scores=True`;
        with a cache, `(output, cache)` with the updated `(S, z)`.

    Example:

    >>> import numpy as np
    >>> layer = KernelAttention(num_heads=2, key_dim=4, num_features=16, seed=0)
    >>> x = np.random.rand(2, 6, 8).astype("float32")
    >>> output, weights = layer(x, x, return_attention_scores=True)
    >>> tuple(output.shape), tuple(weights.shape), tuple(layer.random_features.shape)
    ((2, 6, 8), (2, 2, 6, 6), (16, 4))
    >>> causal = KernelAttention(num_heads=2, key_dim=4, num_features=16, causal=True, seed=0)
    >>> step, cache = causal(x[:, :1], x[:, :1], cache=causal.initial_cache(2))
    >>> tuple(step.shape), tuple(cache[0].shape), tuple(cache[1].shape)
    ((2, 1, 8), (2, 2, 16, 4), (2, 2, 16))

    References:
        Choromanski et al., 2021, "Rethinking Attention with Performers", arXiv:2009.14794.
    """

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        value_dim: int | None = None,
        num_features: int = 256,
        causal: bool = False,
        use_bias: bool = True,
        output_shape: int | None = None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed: int | None = None,
        redraw_interval: int | None = None,
        dropout: float = 0.0,
        **kwargs,
    ):
        check_positive_int("num_features", num_features)
        if not isinstance(causal, bool):
            raise ValueError(f"Expected causal to be a bool. Received: causal={causal!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"Expected seed to be an int or None. Received: seed={seed!r}")
        if redraw_interval is not None:
            check_positive_int("redraw_interval", redraw_interval)
        if isinstance(dropout, bool) or not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"Expected dropout in [0, 1). Received: dropout={dropout!r}")
        # The parent's dropout acts on a weight matrix this layer never forms: it gets rate 0 and
        # `dropout` drops keys from the numerator instead (see above).
        super().__init__(
            num_heads,
            key_dim,
            value_dim=value_dim,
            use_bias=use_bias,
            output_shape=output_shape,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            **kwargs,
        )
        self.dropout = float(dropout)
        self.num_features = int(num_features)
        self.causal = causal
        self.seed = seed
        self.redraw_interval = None if redraw_interval is None else int(redraw_interval)
        # Two generators, so that dropout draws never shift the sequence of feature draws.
        self.feature_seed_generator = keras.random.SeedGenerator(seed, name="feature_seed")
        self.dropout_seed_generator = keras.random.SeedGenerator(
            None if seed is None else seed + 1, name="dropout_seed"
        )

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        heads, dk, dv = self.num_heads, self.key_dim, self.head_value_dim
        d_out = self._output_shape or query_shape[-1]
        kernels = {
            "query": (query_shape[-1], heads, dk),
            "key": (key_shape[-1], heads, dk),
            "value": (value_shape[-1], heads, dv),
            "output": (heads, dv, d_out),
        }
        biases = {
            "query": (heads, dk),
            "key": (heads, dk),
            "value": (heads, dv),
            "output": (d_out,),
        }
        # Kernel and bias of each projection in turn (MultiHeadAttention creates all kernels
        # first): the order of the weights in saved models.
        for name, shape in kernels.items():
            setattr(self, f"{name}_kernel", self._kernel(f"{name}_kernel", shape))
            if self.use_bias:
                setattr(self, f"{name}_bias", self._bias(f"{name}_bias", biases[name]))
        self.random_features = self.add_weight(
            name="random_features",
            shape=(self.num_features, dk),
            initializer=lambda shape, dtype=None: self._draw_features(),
            trainable=False,
            dtype="float32",
            autocast=False,
        )
        self.training_calls = self.add_weight(
            name="training_calls", shape=(), initializer="zeros", trainable=False, dtype="int64"
        )
        self.built = True

    def _draw_features(self):
        """A fresh draw of the positive-orthogonal random features `(num_features, key_dim)`.

        Rows come in blocks of `key_dim` mutually orthogonal, uniformly random directions (QR of a
        Gaussian matrix with the signs of R's diagonal folded in, i.e. a Haar-random rotation),
        each rescaled to the norm of an independent Gaussian vector in `R^key_dim`, so every row
        is marginally `N(0, I)` while rows within a block are exactly orthogonal.
        """
        m, dk = self.num_features, self.key_dim
        blocks = -(-m // dk)
        gaussian = keras.random.normal((blocks, dk, dk), seed=self.feature_seed_generator)
        q, r = ops.qr(gaussian)  # (blocks, dk, dk) each
        # Signs of R's diagonal make Q Haar-distributed (LAPACK fixes them otherwise).
        q = q * ops.expand_dims(ops.sign(ops.diagonal(r, axis1=-2, axis2=-1)), 1)
        # Columns of each Q are the directions: (blocks, dk, dk) -> (blocks * dk, dk) -> (m, dk)
        directions = ops.reshape(ops.transpose(q, (0, 2, 1)), (blocks * dk, dk))[:m]
        norms = ops.norm(
            keras.random.normal((m, dk), seed=self.feature_seed_generator), axis=-1, keepdims=True
        )
        return ops.cast(directions * norms, "float32")

    def redraw_features(self) -> None:
        """Replace `random_features` by a fresh draw (deterministic given `seed`)."""
        self.random_features.assign(self._draw_features())

    def initial_cache(self, batch_size):
        """Zero running sums `(S, z)` for incremental causal decoding, float32:
        `(batch, heads, num_features, value_dim)` and `(batch, heads, num_features)`."""
        heads, m = self.num_heads, self.num_features
        return (
            ops.zeros((batch_size, heads, m, self.head_value_dim), "float32"),
            ops.zeros((batch_size, heads, m), "float32"),
        )

    def _count_training_call(self):
        """Advance `training_calls`; redraw the features on every `redraw_interval`-th call."""
        calls = self.training_calls + 1
        self.training_calls.assign(calls)
        redraw = ops.equal(calls % self.redraw_interval, 0)
        # Drawn every call (a few tiny QRs) and kept only when due: no data-dependent branch.
        self.random_features.assign(
            ops.where(redraw, self._draw_features(), self.random_features.value)
        )

    def _features(self, x, mask=None, is_query=False):
        """phi(x) in float32 for `x` `(batch, heads, T, key_dim)` -> `(batch, heads, T, m)`."""
        x = ops.cast(x, "float32") * (self.key_dim**-0.25)
        w = ops.cast(self.random_features, "float32")
        logits = ops.einsum("bhte,me->bhtm", x, w)
        logits = logits - 0.5 * ops.sum(ops.square(x), axis=-1, keepdims=True)
        if is_query:
            stabiliser = ops.max(logits, axis=-1, keepdims=True)
        elif self.causal:
            stabiliser = 0.5 * ops.max(ops.sum(ops.square(w), axis=-1))
        else:
            valid = logits if mask is None else ops.where(mask, logits, _LOG_ZERO)
            stabiliser = ops.max(valid, axis=(2, 3), keepdims=True)
        logits = logits - ops.stop_gradient(stabiliser)
        if mask is not None:
            logits = ops.where(mask, logits, _LOG_ZERO)
        return ops.exp(logits) / math.sqrt(self.num_features)

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        return_attention_scores=False,
        training=None,
        cache=None,
    ):
        if cache is not None and not self.causal:
            raise ValueError(
                "A cache holds the running sums of causal attention; it needs causal=True. "
                f"Received: causal={self.causal}"
            )
        if cache is not None and return_attention_scores:
            raise ValueError(
                "With a cache the past keys live only in the running sums, so no weights over "
                "them can be returned. Received: return_attention_scores=True with a cache"
            )
        if training and self.redraw_interval is not None:
            self._count_training_call()
        q = self.project_query(query)  # (batch, heads, T_q, dk)
        k, v = self.project_key_value(value, key)  # (batch, heads, T_k, dk), (..., dv)
        v = ops.cast(v, "float32")
        key_mask = None
        if value_mask is not None:
            key_mask = ops.cast(value_mask, "bool")[:, None, :, None]  # (batch, 1, T_k, 1)
        phi_q = self._features(q, is_query=True)  # (batch, heads, T_q, m)
        phi_k = self._features(k, mask=key_mask)  # (batch, heads, T_k, m), 0 on padded keys

        phi_k_values = phi_k  # the numerator's keys: dropped out in training
        if training and self.dropout > 0.0:
            # One keep/drop per (batch, head, key), 0 or 1 / (1 - p); see the class docstring.
            keep = keras.random.dropout(
                ops.ones_like(phi_k[..., :1]), self.dropout, seed=self.dropout_seed_generator
            )
            phi_k_values = phi_k * keep

        if self.causal:
            # Prefix sums over time: (batch, heads, T, m, dv) and (batch, heads, T, m).
            kv = ops.cumsum(ops.einsum("bhsm,bhse->bhsme", phi_k_values, v), axis=2)
            normaliser = ops.cumsum(phi_k, axis=2)
            if cache is not None:
                # Positions before this call: (batch, heads, 1, m, dv) and (batch, heads, 1, m).
                kv = kv + ops.expand_dims(ops.cast(cache[0], "float32"), 2)
                normaliser = normaliser + ops.expand_dims(ops.cast(cache[1], "float32"), 2)
                cache = (kv[:, :, -1], normaliser[:, :, -1])
            numerator = ops.einsum("bhtm,bhtme->bhte", phi_q, kv)
            denominator = ops.einsum("bhtm,bhtm->bht", phi_q, normaliser)
        else:
            kv = ops.einsum("bhsm,bhse->bhme", phi_k_values, v)  # (batch, heads, m, dv)
            numerator = ops.einsum("bhtm,bhme->bhte", phi_q, kv)
            denominator = ops.einsum("bhtm,bhm->bht", phi_q, ops.sum(phi_k, axis=2))
        denominator = ops.expand_dims(denominator, -1)  # (batch, heads, T_q, 1)
        safe = ops.where(denominator > 0, denominator, ops.ones_like(denominator))
        context = ops.cast(numerator / safe, self.compute_dtype)  # (batch, heads, T_q, dv)

        output = ops.einsum("bhte,heo->bto", context, self.output_kernel)
        if self.use_bias:
            output = output + self.output_bias
        output = apply_query_mask(output, query_mask)
        if cache is not None:
            return output, cache
        if not return_attention_scores:
            return output
        scores = ops.einsum("bhqm,bhkm->bhqk", phi_q, phi_k)  # (batch, heads, T_q, T_k)
        if self.causal:
            t_q, t_k = ops.shape(scores)[2], ops.shape(scores)[3]
            causal = ops.expand_dims(ops.arange(t_q), -1) >= ops.expand_dims(ops.arange(t_k), 0)
            scores = ops.where(causal, scores, ops.zeros_like(scores))
        weights = scores / safe
        return output, ops.cast(weights, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(self, "num_features", "causal", "seed", "redraw_interval")
        )
        return config
