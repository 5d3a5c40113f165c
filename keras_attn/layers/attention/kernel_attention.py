"""Performer (FAVOR+) multi-head attention: softmax attention approximated in linear time."""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.mask_passthrough import FirstInputMaskPassthrough
from keras_attn.ops.masking import apply_query_mask

# Stands in for log(0) inside exp(): exp(-1e9) is exactly 0 in float32, and the value itself is
# finite, so gradients through the masked branch stay finite.
_LOG_ZERO = -1e9


@keras_attn_export("keras_attn.layers.KernelAttention")
class KernelAttention(FirstInputMaskPassthrough, keras.layers.Layer):
    """Multi-head attention with Performer's positive orthogonal random features (FAVOR+).

    Projections are those of `MultiHeadAttention`; per head (shapes for one batch element), with
    `q_t = Q_t / key_dim^(1/4)`, `k_s = K_s / key_dim^(1/4)` and random features `w_1..w_m`
    (`m = num_features`, rows of `random_features` `(m, key_dim)`):

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
    float32. The random features are drawn once in `build` (orthogonal blocks of Gaussian rows,
    rescaled to chi-distributed norms) and stored as a non-trainable weight, so saving and loading
    reproduce the outputs; they are not redrawn during training.

    Padded keys get `phi(k) = 0` and so contribute nothing; a query with no real key gets a zero
    context. With `return_attention_scores=True` the implied weights
    `phi(q_t)^T phi(k_s) / phi(q_t)^T sum_s phi(k_s)` `(batch, heads, T_q, T_k)` are formed as well
    (quadratic, for inspection only).

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
        seed: seed of the random features (None draws a fresh one).

    Call arguments:
        query: `(batch, T_q, d_q)`.
        value: `(batch, T_k, d_v)`.
        key: `(batch, T_k, d_k)`; defaults to `value`.
        query_mask: bool `(batch, T_q)`; padded queries get a zero output. Filled from Keras
            masking when not given.
        value_mask: bool `(batch, T_k)`; padded keys contribute nothing. Filled from Keras masking
            when not given.
        return_attention_scores: also return the implied weights `(batch, heads, T_q, T_k)`.

    Returns:
        `output` `(batch, T_q, d_out)`, or `(output, weights)` when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = KernelAttention(num_heads=2, key_dim=4, num_features=16, seed=0)
    >>> x = np.random.rand(2, 6, 8).astype("float32")
    >>> output, weights = layer(x, x, return_attention_scores=True)
    >>> tuple(output.shape), tuple(weights.shape), tuple(layer.random_features.shape)
    ((2, 6, 8), (2, 2, 6, 6), (16, 4))

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
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("key_dim", key_dim)):
            _check_positive_int(name, value)
        _check_positive_int("num_features", num_features)
        if value_dim is not None:
            _check_positive_int("value_dim", value_dim)
        if output_shape is not None:
            _check_positive_int("output_shape", output_shape)
        if not isinstance(causal, bool):
            raise ValueError(f"Expected causal to be a bool. Received: causal={causal!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"Expected seed to be an int or None. Received: seed={seed!r}")
        self.num_heads = int(num_heads)
        self.key_dim = int(key_dim)
        self.value_dim = None if value_dim is None else int(value_dim)
        self.num_features = int(num_features)
        self.causal = causal
        self.use_bias = bool(use_bias)
        self._output_shape = None if output_shape is None else int(output_shape)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.supports_masking = True

    @property
    def output_shape(self) -> int | None:
        """The configured size of the output's last axis (None = the query's)."""
        return self._output_shape

    @property
    def head_value_dim(self) -> int:
        """Size of each head's values (`value_dim`, or `key_dim` when not given)."""
        return self.key_dim if self.value_dim is None else self.value_dim

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
        for name, shape in kernels.items():
            kernel = self.add_weight(
                name=f"{name}_kernel", shape=shape, initializer=self.kernel_initializer
            )
            setattr(self, f"{name}_kernel", kernel)
            if self.use_bias:
                bias = self.add_weight(
                    name=f"{name}_bias", shape=biases[name], initializer=self.bias_initializer
                )
                setattr(self, f"{name}_bias", bias)
        features = _orthogonal_random_features(self.num_features, dk, seed=self.seed)
        self.random_features = self.add_weight(
            name="random_features",
            shape=features.shape,
            initializer=lambda shape, dtype=None: ops.convert_to_tensor(features, dtype=dtype),
            trainable=False,
            dtype="float32",
            autocast=False,
        )
        self.built = True

    def _project(self, x, name):
        # (batch, T, d) x (d, heads, e) -> (batch, heads, T, e)
        projected = ops.einsum("btd,dhe->bhte", x, getattr(self, f"{name}_kernel"))
        if self.use_bias:
            projected = projected + ops.expand_dims(getattr(self, f"{name}_bias"), 1)
        return projected

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
    ):
        key = value if key is None else key
        q = self._project(query, "query")  # (batch, heads, T_q, dk)
        k = self._project(key, "key")  # (batch, heads, T_k, dk)
        v = ops.cast(self._project(value, "value"), "float32")  # (batch, heads, T_k, dv)
        key_mask = None
        if value_mask is not None:
            key_mask = ops.cast(value_mask, "bool")[:, None, :, None]  # (batch, 1, T_k, 1)
        phi_q = self._features(q, is_query=True)  # (batch, heads, T_q, m)
        phi_k = self._features(k, mask=key_mask)  # (batch, heads, T_k, m), 0 on padded keys

        if self.causal:
            # Prefix sums over time: (batch, heads, T, m, dv) and (batch, heads, T, m).
            kv = ops.cumsum(ops.einsum("bhsm,bhse->bhsme", phi_k, v), axis=2)
            numerator = ops.einsum("bhtm,bhtme->bhte", phi_q, kv)
            denominator = ops.einsum("bhtm,bhtm->bht", phi_q, ops.cumsum(phi_k, axis=2))
        else:
            kv = ops.einsum("bhsm,bhse->bhme", phi_k, v)  # (batch, heads, m, dv)
            numerator = ops.einsum("bhtm,bhme->bhte", phi_q, kv)
            denominator = ops.einsum("bhtm,bhm->bht", phi_q, ops.sum(phi_k, axis=2))
        denominator = ops.expand_dims(denominator, -1)  # (batch, heads, T_q, 1)
        safe = ops.where(denominator > 0, denominator, ops.ones_like(denominator))
        context = ops.cast(numerator / safe, self.compute_dtype)  # (batch, heads, T_q, dv)

        output = ops.einsum("bhte,heo->bto", context, self.output_kernel)
        if self.use_bias:
            output = output + self.output_bias
        output = apply_query_mask(output, query_mask)
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
            num_heads=self.num_heads,
            key_dim=self.key_dim,
            value_dim=self.value_dim,
            num_features=self.num_features,
            causal=self.causal,
            use_bias=self.use_bias,
            output_shape=self._output_shape,
            kernel_initializer=keras.saving.serialize_keras_object(self.kernel_initializer),
            bias_initializer=keras.saving.serialize_keras_object(self.bias_initializer),
            seed=self.seed,
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for name in ("kernel_initializer", "bias_initializer"):
            config[name] = keras.saving.deserialize_keras_object(config[name])
        return cls(**config)


def _orthogonal_random_features(num_features: int, dim: int, seed: int | None = None) -> np.ndarray:
    """Positive-orthogonal random features of FAVOR+: `(num_features, dim)` float32.

    Rows come in blocks of `dim` mutually orthogonal, uniformly random directions (QR of a
    Gaussian matrix with the signs of R's diagonal folded in, i.e. a Haar-random rotation), each
    rescaled to the norm of an independent Gaussian vector in `R^dim`, so every row is marginally
    `N(0, I)` while rows within a block are exactly orthogonal.

    Example:

    >>> w = _orthogonal_random_features(4, 4, seed=0)
    >>> gram = w @ w.T
    >>> bool(np.allclose(gram - np.diag(np.diag(gram)), 0.0, atol=1e-5))
    True
    """
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(-(-num_features // dim)):
        q, r = np.linalg.qr(rng.normal(size=(dim, dim)))
        # Signs of R's diagonal make Q Haar-distributed (LAPACK fixes them otherwise).
        blocks.append((q * np.sign(np.diag(r))).T)
    directions = np.concatenate(blocks, axis=0)[:num_features]
    norms = np.linalg.norm(rng.normal(size=(num_features, dim)), axis=1, keepdims=True)
    return (directions * norms).astype("float32")


def _check_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Expected {name} to be a positive int. Received: {name}={value!r}")
