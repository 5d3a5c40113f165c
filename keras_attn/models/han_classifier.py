"""Functional builder of the hierarchical attention network classifier (Yang et al. 2016)."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.attention.hierarchical_attention import HierarchicalAttention

EMBEDDING = "embedding"
HIERARCHY = "hierarchical_attention"


@keras_attn_export("keras_attn.models.han_classifier")
def han_classifier(
    vocabulary_size: int,
    num_classes: int,
    embedding_dim: int = 200,
    word_units: int = 50,
    sentence_units: int = 50,
    encoder: str = "gru",
    dropout: float = 0.0,
    name: str = "han_classifier",
    reset_after: bool = True,
) -> keras.Model:
    """Hierarchical attention network: word GRU + attention → sentence GRU + attention → softmax.

        x_sw = E[w_sw]                                       (batch, S, W, e)
        v = HierarchicalAttention(x)                         (batch, 2 * sentence_units)
        logits = Dropout(v) W + b                            (batch, num_classes) float32

    `HierarchicalAttention` runs a bidirectional word encoder over each sentence, pools it with
    a learned word context vector (`ContextAttentionPooling`), runs a bidirectional sentence
    encoder over the sentence vectors and pools them with a sentence context vector. Id 0 is
    padding (Keras masking from the embedding): padded words and all-padding sentences get
    exactly zero weight. The defaults are the paper's sizes (200-d embeddings, 50-unit GRUs per
    direction); the paper uses no dropout.

    Args:
        vocabulary_size: number of word ids, padding id 0 included.
        num_classes: number of classes.
        embedding_dim: word embedding size `e`.
        word_units: size of each direction of the word encoder.
        sentence_units: size of each direction of the sentence encoder.
        encoder: `"gru"` (the paper's) or `"lstm"`.
        reset_after: the GRU's form (`encoder="gru"` only): True (the default) is Keras' and
            cuDNN's, False Cho et al.'s equations.
        dropout: dropout rate on the document vector.
        name: model name.

    Returns:
        A `keras.Model` from `token_ids` (int32 `(batch, S, W)`: S sentences of W words) to
        float32 logits `(batch, num_classes)`. `han_attention_weights(model, ids)` reads its word
        and sentence weights.

    Example:

    >>> model = han_classifier(40, 3, embedding_dim=8, word_units=4, sentence_units=3)
    >>> tuple(model.output.shape)
    (None, 3)

    References:
        Yang, Yang, Dyer, He, Smola and Hovy, 2016, "Hierarchical Attention Networks for Document
        Classification", NAACL.
    """
    if num_classes <= 0:
        raise ValueError(f"Expected a positive num_classes. Received: num_classes={num_classes}")
    token_ids = keras.Input((None, None), dtype="int32", name="token_ids")
    embedding = keras.layers.Embedding(
        vocabulary_size, embedding_dim, mask_zero=True, name=EMBEDDING
    )
    embedded = embedding(token_ids)  # (batch, S, W, e), Keras mask (batch, S, W)
    document = HierarchicalAttention(
        word_units, sentence_units, encoder=encoder, reset_after=reset_after, name=HIERARCHY
    )(embedded)  # (batch, 2 * sentence_units)
    document = keras.layers.Dropout(dropout, name="dropout")(document)
    logits = keras.layers.Dense(num_classes, dtype="float32", name="classifier")(document)
    return keras.Model(token_ids, logits, name=name)


@keras_attn_export("keras_attn.models.han_attention_weights")
def han_attention_weights(model: keras.Model, token_ids) -> tuple:
    """The word and sentence attention weights of a `han_classifier` model on `token_ids`.

    Runs the model's own embedding and hierarchy layers (eagerly, inference mode).

    Args:
        model: a model returned by `han_classifier` (trained or not).
        token_ids: int32 `(batch, S, W)`, 0 at padding.

    Returns:
        `(word_weights, sentence_weights)`, `(batch, S, W)` and `(batch, S)`: each real
        sentence's word weights sum to one, the sentence weights of a document with a real word
        sum to one, and padding gets exactly zero.

    Example:

    >>> import numpy as np
    >>> model = han_classifier(40, 3, embedding_dim=8, word_units=4)
    >>> words, sentences = han_attention_weights(model, np.array([[[5, 6, 0], [7, 0, 0]]]))
    >>> np.round(words.numpy().sum(-1), 5).tolist(), float(np.round(sentences.numpy().sum(), 5))
    ([[1.0, 1.0]], 1.0)
    """
    token_ids = ops.convert_to_tensor(token_ids, "int32")
    embedding = model.get_layer(EMBEDDING)
    embedded = embedding(token_ids)  # (batch, S, W, e)
    _, weights = model.get_layer(HIERARCHY)(
        embedded, mask=embedding.compute_mask(token_ids), return_attention_scores=True
    )
    return weights
