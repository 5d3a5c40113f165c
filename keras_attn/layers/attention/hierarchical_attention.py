"""Hierarchical attention network: words → sentence vectors → document vector."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import check_choice, serialize_arguments
from keras_attn.layers.attention.context_attention_pooling import ContextAttentionPooling
from keras_attn.layers.mask_passthrough import PooledOutputMask
from keras_attn.layers.recurrent.bidirectional_encoder import BidirectionalEncoder

_ENCODERS = ("gru", "lstm")


@keras_attn_export("keras_attn.layers.HierarchicalAttention")
class HierarchicalAttention(PooledOutputMask, keras.layers.Layer):
    """Hierarchical attention (HAN): attention-pooled words make sentences, sentences a document.

    For a document of `S` sentences of `W` embedded words `x_sw` `(batch, S, W, d)`:

        h_sw = BiRNN_word(x_s1..x_sW)_w                      (batch, S, W, 2 * word_units)
        s_s = sum_w alpha_sw h_sw,  alpha_s = softmax_w(tanh(W_w h_sw + b_w)^T u_w)
                                                             (batch, S, 2 * word_units)
        h_s = BiRNN_sentence(s_1..s_S)_s                     (batch, S, 2 * sentence_units)
        v = sum_s beta_s h_s,  beta = softmax_s(tanh(W_s h_s + b_s)^T u_s)
                                                             (batch, 2 * sentence_units)

    Each attention is a `ContextAttentionPooling` whose hidden size equals its encoder's output
    size (`2 * units`), as in the paper. Every sentence runs through the word encoder
    independently (the batch and sentence axes are merged). A sentence whose words are all padding
    is padding itself: its word weights are all zero, its sentence vector is zero, the sentence
    encoder skips it and it gets exactly zero sentence weight; a document with no real word gives
    a zero vector, never NaN.

    Args:
        word_units: size of each direction of the word encoder.
        sentence_units: size of each direction of the sentence encoder.
        encoder: recurrent cell of both bidirectional encoders, `"gru"` (the paper's) or
            `"lstm"`.
        reset_after: the GRU's form (`encoder="gru"` only): True (the default) is Keras' and
            cuDNN's, False Cho et al.'s equations (`BidirectionalEncoder`).

    Call arguments:
        inputs: embedded words `(batch, S, W, d)`.
        mask: bool word mask `(batch, S, W)` (as `Embedding(mask_zero=True)` gives for word ids
            `(batch, S, W)`), or a sentence mask `(batch, S)` when each sentence is entirely real
            or entirely padding; True at real positions. Filled from Keras masking.
        return_attention_scores: also return both levels' weights.

    Returns:
        The document vector `(batch, 2 * sentence_units)`, or with
        `return_attention_scores=True` the pair `(document, (word_weights, sentence_weights))`
        (the `(output, weights)` structure of every keras_attn attention layer, the weights
        being both levels'): `word_weights` `(batch, S, W)` (each real sentence's weights over
        its words sum to one) and `sentence_weights` `(batch, S)`.

    Example:

    >>> import numpy as np
    >>> layer = HierarchicalAttention(word_units=3, sentence_units=2)
    >>> document, (words, sentences) = layer(
    ...     np.ones((2, 4, 5, 6), "float32"), return_attention_scores=True
    ... )
    >>> tuple(document.shape), tuple(words.shape), tuple(sentences.shape)
    ((2, 4), (2, 4, 5), (2, 4))

    References:
        Yang, Yang, Dyer, He, Smola and Hovy, 2016, "Hierarchical Attention Networks for Document
        Classification", NAACL, section 2.
    """

    def __init__(
        self,
        word_units: int,
        sentence_units: int,
        encoder: str = "gru",
        reset_after: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (("word_units", word_units), ("sentence_units", sentence_units)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(
                    f"Expected {name} to be a positive integer. Received: {name}={value!r}"
                )
        self.word_units = word_units
        self.sentence_units = sentence_units
        self.encoder = check_choice("encoder", encoder, _ENCODERS)
        self.reset_after = reset_after
        self.word_encoder, self.word_attention = self._level("word", word_units)
        self.sentence_encoder, self.sentence_attention = self._level("sentence", sentence_units)
        self.supports_masking = True

    def _level(self, level: str, units: int) -> tuple:
        """The bidirectional encoder (`units` per direction) and the attention pooling of one
        level, named `<level>_encoder` and `<level>_attention`."""
        encoder = BidirectionalEncoder(
            units,
            cell=self.encoder,
            reset_after=self.reset_after,
            name=f"{level}_encoder",
            dtype=self.dtype_policy,
        )
        attention = ContextAttentionPooling(
            2 * units, name=f"{level}_attention", dtype=self.dtype_policy
        )
        return encoder, attention

    def set_use_cudnn(self, use_cudnn) -> None:
        """Switch the Cudnn kernels of both encoders on/off (False before tracing an export)."""
        self.word_encoder.set_use_cudnn(use_cudnn)
        self.sentence_encoder.set_use_cudnn(use_cudnn)

    def build(self, inputs_shape):
        _, num_sentences, num_words, depth = inputs_shape
        word_size, sentence_size = 2 * self.word_units, 2 * self.sentence_units
        self.word_encoder.build((None, num_words, depth))
        self.word_attention.build((None, num_words, word_size))
        self.sentence_encoder.build((None, num_sentences, word_size))
        self.sentence_attention.build((None, num_sentences, sentence_size))
        self.built = True

    def call(self, inputs, mask=None, return_attention_scores=False):
        shape = ops.shape(inputs)
        batch, num_sentences, num_words = shape[0], shape[1], shape[2]
        word_mask = None
        if mask is not None:
            word_mask = ops.cast(mask, "bool")
            if len(word_mask.shape) == 2:  # sentence mask (batch, S) -> (batch, S, W)
                word_mask = ops.broadcast_to(
                    ops.expand_dims(word_mask, -1), (batch, num_sentences, num_words)
                )
        # Every sentence on its own: (batch, S, W, d) -> (batch * S, W, d)
        words = ops.reshape(inputs, (-1, num_words, inputs.shape[-1]))
        flat_word_mask = None if word_mask is None else ops.reshape(word_mask, (-1, num_words))
        word_states = self.word_encoder(words, mask=flat_word_mask)[0]
        sentences, word_weights = self.word_attention(
            word_states, mask=flat_word_mask, return_attention_scores=True
        )
        # (batch * S, 2 * word_units) -> (batch, S, 2 * word_units)
        sentences = ops.reshape(sentences, (batch, num_sentences, 2 * self.word_units))
        sentence_mask = None if word_mask is None else ops.any(word_mask, axis=-1)
        sentence_states = self.sentence_encoder(sentences, mask=sentence_mask)[0]
        document, sentence_weights = self.sentence_attention(
            sentence_states, mask=sentence_mask, return_attention_scores=True
        )
        if return_attention_scores:
            # (batch * S, W) -> (batch, S, W)
            word_weights = ops.reshape(word_weights, (batch, num_sentences, num_words))
            return document, (word_weights, sentence_weights)
        return document

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(self, "word_units", "sentence_units", "encoder", "reset_after")
        )
        return config
