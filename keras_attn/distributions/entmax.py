"""alpha-entmax with a fixed or learned alpha as a serializable object."""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_attn import ops as attn_ops
from keras_attn.api_export import keras_attn_export
from keras_attn.distributions.distribution import Distribution

# Lower bound of a learned alpha above 1.
ALPHA_MARGIN = 0.01


@keras_attn_export("keras_attn.distributions.Entmax")
class Entmax(Distribution):
    """alpha-entmax over the last axis: `p_i = max((alpha - 1) s_i - tau, 0) ** (1 / (alpha - 1))`.

    `tau` makes the weights sum to one and is found by bisection (`keras_attn.ops.entmax_bisect`).
    `alpha -> 1` tends to softmax, `alpha = 1.5` is 1.5-entmax, `alpha = 2` is sparsemax. With
    `learnable=True`, alpha is a trainable scalar kept above 1 as
    `alpha = 1 + ALPHA_MARGIN + softplus(raw)` (`ALPHA_MARGIN = 0.01` keeps `1 / (alpha - 1)`
    finite in float32; `raw`, float32, starts where alpha equals `alpha`), trained by the
    implicit gradient `d p / d alpha` (Correia, Niculae and Martins, 2019). Under a mixed policy
    Keras reads `raw` in the compute dtype inside `call`, so the learned alpha is rounded to it
    there.

    Args:
        alpha: the fixed alpha (> 1), or the initial alpha when `learnable` (> 1.01).
        learnable: learn alpha as a weight (one scalar per layer).
        n_iter: bisection steps.

    Call arguments:
        scores: raw scores, e.g. `(batch, T_q, T_k)`.
        attention_mask: bool, broadcastable to `scores`, True where attention is allowed.

    Returns:
        Weights of the shape and compute dtype of `scores`; exactly zero on masked positions and
        all zeros on a fully masked row.

    Example:

    >>> import numpy as np
    >>> weights = Entmax(alpha=2.0)(np.array([[0.1, 1.1, 0.5]], "float32"))
    >>> np.round(np.asarray(weights, "float64"), 4).tolist()
    [[0.0, 0.8, 0.2]]
    >>> learned = Entmax(alpha=1.5, learnable=True)
    >>> _ = learned(np.zeros((1, 3), "float32"))
    >>> round(float(learned.current_alpha()), 4)
    1.5

    References:
        Peters, Niculae and Martins, 2019, "Sparse Sequence-to-Sequence Models",
        arXiv:1905.05702; Correia, Niculae and Martins, 2019, "Adaptively Sparse Transformers",
        arXiv:1909.00015.
    """

    def __init__(self, alpha: float = 1.5, learnable: bool = False, n_iter: int = 50, **kwargs):
        super().__init__(**kwargs)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 1:
            raise ValueError(f"Expected alpha to be a number > 1. Received: alpha={alpha!r}")
        if not isinstance(learnable, bool):
            raise ValueError(f"Expected learnable to be a bool. Received: learnable={learnable!r}")
        if isinstance(n_iter, bool) or not isinstance(n_iter, int) or n_iter < 1:
            raise ValueError(
                f"Expected n_iter to be a positive integer. Received: n_iter={n_iter!r}"
            )
        if learnable and not alpha > 1 + ALPHA_MARGIN:
            raise ValueError(
                f"Expected alpha > {1 + ALPHA_MARGIN} when learnable. Received: alpha={alpha!r}"
            )
        self.alpha = float(alpha)
        self.learnable = learnable
        self.n_iter = n_iter

    def build(self, scores_shape, attention_mask_shape=None):
        if self.learnable:
            # softplus^-1(x) = log(expm1(x)): 1 + ALPHA_MARGIN + softplus(raw) = alpha at start.
            self.raw_alpha = self.add_weight(
                name="raw_alpha",
                shape=(),
                initializer=keras.initializers.Constant(
                    math.log(math.expm1(self.alpha - 1.0 - ALPHA_MARGIN))
                ),
            )
        self.built = True

    def current_alpha(self):
        """The alpha in use: the fixed value, or `1 + ALPHA_MARGIN + softplus(raw_alpha)`."""
        if not self.learnable:
            return ops.convert_to_tensor(self.alpha, "float32")
        return 1.0 + ALPHA_MARGIN + ops.softplus(ops.cast(self.raw_alpha, "float32"))

    def call(self, scores, attention_mask=None):
        return attn_ops.entmax_bisect(
            scores, self.current_alpha(), mask=attention_mask, axis=-1, n_iter=self.n_iter
        )

    def get_config(self):
        config = super().get_config()
        config.update(alpha=self.alpha, learnable=self.learnable, n_iter=self.n_iter)
        return config
