"""Token embedding scaled by sqrt(d_model) plus a position encoding, reversible for tied logits."""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_attn._initializers import clone_initializer
from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.embedding.position_embedding import PositionEmbedding
from keras_attn.layers.embedding.sinusoidal_position_encoding import SinusoidalPositionEncoding
from keras_attn.layers.transformer._arguments import check_positive_int, check_rate

POSITION_ENCODINGS = ("sinusoidal", "learned")


@keras_attn_export("keras_attn.layers.TokenAndPositionEmbedding")
class TokenAndPositionEmbedding(keras.layers.Layer):
    """The Transformer's input layer: `E[ids] · sqrt(d) + PE`, with dropout (Vaswani et al. 2017).

        E: (vocabulary_size, d) trainable
        x[b, t] = E[ids[b, t]] · sqrt(d) + PE(start_index + t)        (batch, T, d)
        x = Dropout(x)

    `PE` is the fixed sinusoidal encoding of Vaswani et al. (`position_encoding="sinusoidal"`) or a
    learned table of `max_length` rows (`"learned"`, Gehring et al. 2017). `scale_embeddings=False`
    drops the `sqrt(d)` factor (BERT and GPT do not scale).

    Tied output projection: `layer(hidden, reverse=True)` computes `hidden @ E^T`, the logits
    `(batch, T, vocabulary_size)` of the pre-softmax projection that shares its matrix with the
    embedding (Press & Wolf 2017; section 3.4 of Vaswani et al.). `layer.embeddings` is `E`.

    With `mask_zero=True` id 0 is padding: the output carries the Keras mask `ids != 0`.

    Args:
        vocabulary_size: number of token ids.
        embedding_dim: `d` (`d_model`).
        max_length: number of learned positions; required for `"learned"`, not used by
            `"sinusoidal"` (which has no length limit).
        position_encoding: `"sinusoidal"` or `"learned"`.
        scale_embeddings: multiply the token embeddings by `sqrt(d)`.
        mask_zero: treat id 0 as padding and emit a Keras mask.
        dropout: dropout rate on the sum during training.
        embeddings_initializer: initializer of `E`.

    Call arguments:
        inputs: int ids `(batch, T)`; or, with `reverse=True`, hidden states `(batch, T, d)`.
        start_index: int or int scalar tensor, the position of the first id (incremental
            decoding: one id at `start_index=k` gives row `k` of the full pass).
        reverse: project hidden states to logits with `E^T` instead of embedding ids.
        training: enables dropout.

    Returns:
        `(batch, T, d)` embeddings in the compute dtype, or `(batch, T, vocabulary_size)` logits
        (compute dtype) with `reverse=True`.

    Example:

    >>> import numpy as np
    >>> layer = TokenAndPositionEmbedding(vocabulary_size=10, embedding_dim=4, mask_zero=True)
    >>> ids = np.array([[3, 5, 0]])
    >>> x = layer(ids)
    >>> tuple(x.shape), ops.convert_to_numpy(x._keras_mask).tolist()
    ((1, 3, 4), [[True, True, False]])
    >>> tuple(layer(x, reverse=True).shape)
    (1, 3, 10)

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762.
        Gehring et al., 2017, "Convolutional Sequence to Sequence Learning", arXiv:1705.03122.
        Press & Wolf, 2017, "Using the Output Embedding to Improve Language Models",
        arXiv:1608.05859.
    """

    def __init__(
        self,
        vocabulary_size: int,
        embedding_dim: int,
        max_length: int | None = None,
        position_encoding: str = "sinusoidal",
        scale_embeddings: bool = True,
        mask_zero: bool = False,
        dropout: float = 0.0,
        embeddings_initializer="uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = check_positive_int("vocabulary_size", vocabulary_size)
        self.embedding_dim = check_positive_int("embedding_dim", embedding_dim)
        if max_length is not None:
            check_positive_int("max_length", max_length)
        if position_encoding not in POSITION_ENCODINGS:
            raise ValueError(
                f"Expected position_encoding in {set(POSITION_ENCODINGS)}. "
                f"Received: position_encoding={position_encoding!r}"
            )
        if position_encoding == "learned" and max_length is None:
            raise ValueError(
                "position_encoding='learned' needs max_length (the number of learned positions). "
                "Received: max_length=None"
            )
        self.max_length = max_length
        self.position_encoding = position_encoding
        self.scale_embeddings = bool(scale_embeddings)
        self.mask_zero = bool(mask_zero)
        self.dropout = check_rate("dropout", dropout)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        self.token_embedding = keras.layers.ReversibleEmbedding(
            self.vocabulary_size,
            self.embedding_dim,
            tie_weights=True,
            embeddings_initializer=clone_initializer(self.embeddings_initializer),
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.token_embedding.build(inputs_shape[:2])
        # The masks of ids and hidden states are this layer's business (`compute_mask`); the
        # sublayer only has to accept masked inputs without a warning.
        self.token_embedding.supports_masking = True
        embedded_shape = (*inputs_shape[:2], self.embedding_dim)
        if self.position_encoding == "learned":
            self.position_layer = PositionEmbedding(
                self.max_length, dtype=self.dtype_policy, name="position_embedding"
            )
        else:
            self.position_layer = SinusoidalPositionEncoding(
                dtype=self.dtype_policy, name="position_encoding"
            )
        self.position_layer.build(embedded_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    @property
    def embeddings(self):
        """The token embedding matrix `E` `(vocabulary_size, embedding_dim)`."""
        return self.token_embedding.embeddings

    def call(self, inputs, start_index=0, reverse=False, training=None):
        if reverse:
            return self.token_embedding(inputs, reverse=True)
        embedded = self.token_embedding(inputs)  # (batch, T, d), compute dtype
        if self.scale_embeddings:
            embedded = embedded * ops.cast(math.sqrt(self.embedding_dim), embedded.dtype)
        embedded = embedded + self.position_layer(embedded, start_index=start_index)
        return self.dropout_layer(embedded, training=training)

    def compute_output_spec(self, inputs, start_index=0, reverse=False, training=None):
        # Given, not traced: JAX cannot slice the position table to a symbolic length.
        if reverse:
            return self.token_embedding.compute_output_spec(inputs, reverse=True)
        return keras.KerasTensor((*inputs.shape, self.embedding_dim), dtype=self.compute_dtype)

    def compute_mask(self, inputs, previous_mask=None):
        # Hidden states (the reverse call) keep their mask; ids are masked where they are 0.
        if not self.mask_zero or keras.backend.is_float_dtype(
            keras.backend.standardize_dtype(inputs.dtype)
        ):
            return previous_mask
        return ops.not_equal(inputs, 0)

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self,
                "vocabulary_size",
                "embedding_dim",
                "max_length",
                "position_encoding",
                "scale_embeddings",
                "mask_zero",
                "dropout",
                "embeddings_initializer",
            )
        )
        return config
