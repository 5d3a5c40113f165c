"""Luong's general score parametrized as the dot score plus a learned bilinear term over d."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.scores.general_score import GeneralScore


@keras_attn_export("keras_attn.scores.ResidualGeneralScore")
class ResidualGeneralScore(GeneralScore):
    """General score `a(k_i, q) = q^T (I + W / d) k_i`, `W` `(d, d)` learned, zero at the start.

    The same function class as Luong et al.'s general score `q^T W_a k_i` (`W_a = I + W / d`
    covers every `d x d` matrix), parametrized for Adam. It starts as the dot score (`W = 0`),
    and every entry of `W` acts on the score through a factor `1 / d`.

    Under Adam every entry of a weight matrix moves by about the learning rate per step, whatever
    the gradient's size, so one step can change `q^T W_a k` by up to `lr * sum_ij |q_i| |k_j|`,
    which grows with `d^2`. The factor `1 / d` makes that bound `lr * sum_ij |q_i| |k_j| / d`:
    the `1 / fan_in` rate that muP prescribes for a hidden matrix under Adam (Yang et al., 2021).
    Starting from `I` keeps the score at the dot score's scale instead of a random bilinear
    form. Plain SGD takes steps proportional to the gradient and does not need the factor.

    Queries and keys must have the same size `d` (as for the dot score). The keys are mixed once,
    `K' = K + K W^T / d` `(batch, T_k, d)`, then `a = q^T k'_i`.

    Args:
        kernel_initializer: initializer of `W` (zeros: the score starts as `q^T k_i`).

    Example:

    >>> import numpy as np
    >>> q = np.ones((1, 1, 2), "float32"); k = np.array([[[1.0, 2.0], [3.0, 4.0]]], "float32")
    >>> ResidualGeneralScore()(q, k).numpy().tolist()  # W = 0: the dot score
    [[[3.0, 7.0]]]

    References:
        Luong, Pham and Manning, 2015, arXiv:1508.04025, eq. (8) "general".
        Yang et al., 2021, "Tensor Programs V: Tuning Large Neural Networks via Zero-Shot
        Hyperparameter Transfer", arXiv:2203.03466 (the 1/fan_in Adam rate of hidden weights).
    """

    def __init__(self, kernel_initializer="zeros", **kwargs):
        super().__init__(kernel_initializer=kernel_initializer, **kwargs)

    def build(self, query_shape, keys_shape):
        size, key_size = query_shape[-1], keys_shape[-1]
        if size is None or key_size is None or size != key_size:
            raise ValueError(
                "ResidualGeneralScore needs queries and keys of the same, known size d. "
                f"Received: query_shape={tuple(query_shape)}, keys_shape={tuple(keys_shape)}"
            )
        self._scale = 1.0 / size
        super().build(query_shape, keys_shape)  # W: (d, d)

    def prepare_keys(self, keys):
        # (batch, T_k, d) + (batch, T_k, d) x (d, d)^T / d -> (batch, T_k, d)
        mixed = super().prepare_keys(keys)
        return ops.add(keys, mixed * ops.cast(self._scale, mixed.dtype))
