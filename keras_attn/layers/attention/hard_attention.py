"""Stochastic hard attention: attend to exactly one position, sampled during training."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn import ops as attn_ops
from keras_attn import scores
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.attention.base_attention import BaseAttention
from keras_attn.ops.masking import merge_masks

ESTIMATORS = ("gumbel", "reinforce")


@keras_attn_export("keras_attn.layers.HardAttention")
class HardAttention(BaseAttention):
    """Hard attention: `c_t = v_{s_t}` with one position `s_t ~ Multinoulli(alpha_t)` (Xu et al.).

    `alpha_t = softmax_i(a(k_i, q_t))` `(batch, T_q, T_k)` over the real keys. The weights are
    one-hot `(batch, T_q, T_k)` and the context `c_t = sum_i w_ti v_i` `(batch, T_q, d_v)` is the
    value at the chosen position:

    - training: `s_t` is sampled from `alpha_t` with the Gumbel-max trick,
      `s_t = argmax_i (log alpha_ti + g_ti)`, `g = -log(-log u)`, `u ~ U(0, 1)`;
    - inference: `s_t = argmax_i alpha_ti`, deterministic.

    Padded keys are never chosen; a query without any real key gets all-zero weights. The pipeline
    is `BaseAttention`'s; the sampling is its weights step.

    Gradient estimators (`estimator`):

    - `"gumbel"` (default), straight-through Gumbel-softmax: the forward value is the one-hot
      sample, the backward pass is that of the relaxed sample
      `y = softmax((log alpha + g) / temperature)` drawn with the same noise. It is the default
      because it trains with plain backpropagation from any loss, with no reward signal and no
      extra loss term (biased, but low-variance).
    - `"reinforce"`, the score-function estimator of Xu et al. (section 4.1): no gradient flows
      through the weights. A layer cannot see the reward, so the training step adds the term
      itself: `log_prob(...)` gives `log alpha_{t, s_t}` of the sampled positions, and
      `advantage(reward)` returns `reward - b` and updates the moving-average baseline
      `b <- baseline_decay * b + (1 - baseline_decay) * mean(reward)` (a non-trainable weight).
      The loss to minimise is `task_loss - mean(stop_gradient(advantage) * log_prob)`.

    Args:
        score: a name from `keras_attn.scores.SCORES` or a `keras_attn.scores.Score` instance.
            The distribution is always the softmax: the multinoulli of the paper.
        estimator: `"gumbel"` or `"reinforce"`, see above.
        temperature: temperature of the relaxed sample of the Gumbel estimator, positive.
        baseline_decay: decay of the REINFORCE baseline's moving average, in `[0, 1)`.
        seed: integer seed of the sampler (a `keras.random.SeedGenerator`), or None.

    Call arguments:
        query: `(batch, T_q, d_q)`.
        value: `(batch, T_k, d_v)`.
        key: `(batch, T_k, d_k)`, defaults to `value`.
        query_mask: bool `(batch, T_q)`; padded queries get a zero context. Filled from Keras
            masking when not given.
        value_mask: bool `(batch, T_k)`; padded keys are never chosen. Filled from Keras masking
            when not given.
        attention_mask: bool `(batch, T_q, T_k)`, True where a key may be chosen.
        return_attention_scores: also return the one-hot weights.
        training: sample (True) or take the argmax (False/None).

    Returns:
        `context`, or `(context, weights)` when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = HardAttention(score="dot", seed=1)
    >>> q = np.array([[[1.0, 0.0]]], "float32"); v = np.eye(2, dtype="float32")[None]
    >>> context, weights = layer(q, v, return_attention_scores=True)
    >>> weights.numpy().tolist()
    [[[1.0, 0.0]]]

    References:
        Xu, Ba, Kiros, Cho, Courville, Salakhutdinov, Zemel and Bengio, 2015, "Show, Attend and
        Tell", arXiv:1502.03044, section 4.1; Jang, Gu and Poole, 2017, "Categorical
        Reparameterization with Gumbel-Softmax", arXiv:1611.01144.
    """

    def __init__(
        self,
        score="dot",
        estimator: str = "gumbel",
        temperature: float = 1.0,
        baseline_decay: float = 0.9,
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if estimator not in ESTIMATORS:
            raise ValueError(
                f"Expected estimator in {ESTIMATORS}. Received: estimator={estimator!r}"
            )
        if isinstance(temperature, bool) or not float(temperature) > 0.0:
            raise ValueError(
                f"Expected temperature to be positive. Received: temperature={temperature!r}"
            )
        if not 0.0 <= float(baseline_decay) < 1.0:
            raise ValueError(
                f"Expected baseline_decay in [0, 1). Received: baseline_decay={baseline_decay!r}"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"Expected seed to be an integer or None. Received: seed={seed!r}")
        self.score = score
        self.estimator = estimator
        self.temperature = float(temperature)
        self.baseline_decay = float(baseline_decay)
        self.seed = seed
        self.score_fn = scores.get(score, dtype=self.dtype_policy)
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        if self.estimator == "reinforce":
            self.baseline = self.add_weight(
                name="baseline", shape=(), initializer="zeros", trainable=False, dtype="float32"
            )

    def _calculate_scores(self, query, key):
        """The scores `(batch, T_q, T_k)` in float32: `log alpha` up to a per-row constant."""
        return ops.cast(self.score_fn(query, key), "float32")

    def _calculate_weights(
        self, scores, *, value_mask, attention_mask, training, uniform=None, **kwargs
    ):
        """One-hot weights of the sampled (training) or most likely position.

        `uniform`, noise in (0, 1] of the scores' shape, replaces the sampler's own draw (for a
        loop that draws its steps' noise before it starts)."""
        mask = merge_masks(value_mask=value_mask, attention_mask=attention_mask)
        if mask is None:
            mask = ops.ones_like(scores, dtype="bool")
        mask = ops.broadcast_to(mask, ops.shape(scores))
        if training:
            # Gumbel-max: argmax(log alpha + g) is a sample of alpha; the log-normaliser of the
            # softmax is the same for every position, so the raw scores stand in for log alpha.
            if uniform is None:
                uniform = self.draw_uniform(ops.shape(scores))
            perturbed = scores - ops.log(-ops.log(uniform))
        else:
            perturbed = scores
        masked = ops.where(mask, perturbed, ops.full_like(perturbed, -float("inf")))
        chosen = ops.argmax(masked, axis=-1)  # (batch, T_q)
        has_key = ops.cast(ops.any(mask, axis=-1, keepdims=True), "float32")
        one_hot = ops.one_hot(chosen, ops.shape(scores)[-1], dtype="float32") * has_key
        weights = one_hot
        if training and self.estimator == "gumbel":
            relaxed = attn_ops.softmax(perturbed / self.temperature, mask=mask)
            # Forward: exactly the one-hot sample; backward: the gradient of the relaxed sample.
            weights = one_hot + (relaxed - ops.stop_gradient(relaxed))
        return ops.cast(weights, self.compute_dtype)

    def draw_uniform(self, shape):
        """Uniform noise in (0, 1] of `shape`, float32, from the sampler's seed generator."""
        return keras.random.uniform(shape, minval=1e-20, maxval=1.0, seed=self.seed_generator)

    def log_prob(self, query, value, weights, key=None, value_mask=None):
        """`log alpha_{t, s_t}` `(batch, T_q)` float32 of the positions chosen in `weights`.

        Differentiable with respect to the score's weights (and the inputs): the REINFORCE
        term. Rows whose weights are all zero (no real key) give 0.
        """
        logits = self._calculate_scores(query, value if key is None else key)
        mask = merge_masks(value_mask=value_mask)
        log_alpha = ops.log_softmax(
            ops.where(mask, logits, ops.full_like(logits, -1e9)) if mask is not None else logits,
            axis=-1,
        )
        chosen = ops.cast(weights, "float32") > 0.5
        return ops.sum(ops.where(chosen, log_alpha, ops.zeros_like(log_alpha)), axis=-1)

    def advantage(self, reward):
        """`reward - b` (float32, no gradient), then `b` moves towards `mean(reward)`.

        `reward`: a number or a tensor, e.g. `(batch,)` log-likelihoods of the targets. Call once
        per training step, after the layer has been built. Only for `estimator="reinforce"`.
        """
        if self.estimator != "reinforce":
            raise ValueError(
                "advantage() keeps the REINFORCE baseline; it needs estimator='reinforce'. "
                f"Received: estimator={self.estimator!r}"
            )
        reward = ops.stop_gradient(ops.cast(reward, "float32"))
        advantage = reward - self.baseline
        decay = self.baseline_decay
        self.baseline.assign(decay * self.baseline + (1.0 - decay) * ops.mean(reward))
        return advantage

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(self, "score", "estimator", "temperature", "baseline_decay", "seed")
        )
        return config
