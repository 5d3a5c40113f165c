"""Base class of alignment score functions `a(k_i, q)`."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.scores.Score")
class Score(keras.layers.Layer):
    """An alignment score `a(k_i, q)` between every query and every key.

    `score(q, K)` maps queries `(batch, T_q, d_q)` and keys `(batch, T_k, d_k)` to raw scores
    `(batch, T_q, T_k)`; a distribution (softmax, …) turns them into attention weights.

    Subclasses override two hooks:
    - `prepare_keys(keys)`: the part that depends on the keys only (e.g. `K W_2` in the additive
      score). A decoder calls it once per source sentence and reuses the result at every step.
    - `score(query, prepared_keys)`: the per-query part.

    Calling the layer, `score_fn(query, keys)`, runs both. Before calling the hooks directly, build
    the layer with `score_fn.build(query_shape, keys_shape)`.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # Inputs often carry Keras masks; the masks are applied by the distribution, not here.
        self.supports_masking = True

    def build(self, query_shape, keys_shape):
        self.built = True

    def get_config(self) -> dict:
        """The layer's base config (name, dtype policy, trainable).

        Defined here so that a score built with `dtype=<keras.DTypePolicy>`, as the attention
        layers and decoders build theirs, serializes: Keras' automatic config only accepts plain
        constructor arguments. A subclass with constructor arguments adds them.
        """
        return super().get_config()

    def compute_mask(self, query, previous_mask=None):
        return None

    def prepare_keys(self, keys):
        """Key-only precomputation; the identity unless a subclass projects the keys."""
        return keys

    def score(self, query, prepared_keys):
        """Raw scores `(batch, T_q, T_k)` from queries and `prepare_keys(keys)`."""
        raise NotImplementedError(f"{type(self).__name__} must implement score().")

    def call(self, query, keys):
        return self.score(query, self.prepare_keys(keys))

    def compute_output_shape(self, query_shape, keys_shape):
        return (query_shape[0], query_shape[1], keys_shape[1])
