"""Functional builders of a GPT-style decoder-only language model (Radford et al. 2018) and its
last-token sequence classifier."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.pooling.token_pooling import TokenPooling
from keras_attn.layers.transformer.transformer_decoder import TransformerDecoder
from keras_attn.models.transformer.parts import (
    check_heads_divide_width,
    float32_logits,
    learned_position_embedding,
    stack_arguments,
)

# Layer names the decoding view (`GPTSteps`) looks up after a reload.
EMBEDDING = "embedding"
DECODER = "decoder"
LOGITS = "logits"
LAST_TOKEN = "last_token"
CLASSIFIER = "classifier"


@keras_attn_export("keras_attn.models.gpt")
def gpt(
    vocabulary_size: int,
    num_layers: int = 2,
    d_model: int = 128,
    num_heads: int = 4,
    ff_dim: int = 512,
    max_length: int = 256,
    dropout: float = 0.1,
    name: str = "gpt",
) -> keras.Model:
    """A GPT-style causal language model as a Keras functional model.

        token ids (batch, T) → E[ids] + P[0..T-1]         learned positions, no sqrt(d) scaling
        → N pre-LN decoder blocks without cross-attention (causal self-attention, GELU FFN)
        → final LayerNorm → h (batch, T, d)
        logits = h E^T                                     (batch, T, vocabulary_size) float32

    Position `t`'s logits predict token `t + 1` and depend on tokens `0..t` only. The output
    projection is tied to the token embedding. Id 0 is padding (a Keras mask reaches the loss).

    Args:
        vocabulary_size: number of token ids, padding id 0 included.
        num_layers: decoder blocks.
        d_model: model width `d`.
        num_heads: attention heads; must divide `d_model`.
        ff_dim: feed-forward hidden width.
        max_length: number of learned positions (the longest sequence the model reads).
        dropout: dropout on the embeddings, residual branches and attention weights.
        name: model name.

    Returns:
        A `keras.Model` from `token_ids` (int32 `(batch, T)`) to float32 logits.

    Example:

    >>> model = gpt(30, num_layers=1, d_model=8, num_heads=2, ff_dim=16, max_length=10)
    >>> tuple(model.output.shape)
    (None, None, 30)

    References:
        Radford et al., 2018, "Improving Language Understanding by Generative Pre-Training".
        Radford et al., 2019, "Language Models are Unsupervised Multitask Learners" (pre-LN).
    """
    check_heads_divide_width(d_model, num_heads)
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    embedding = learned_position_embedding(vocabulary_size, d_model, max_length, dropout, EMBEDDING)
    stack = stack_arguments(
        num_layers,
        num_heads,
        ff_dim,
        dropout,
        cross_attention=False,
        activation="gelu",
        normalize_first=True,
    )
    hidden = TransformerDecoder(**stack, name=DECODER)(embedding(token_ids))
    logits = float32_logits(embedding(hidden, reverse=True), LOGITS)
    return keras.Model(token_ids, logits, name=name)


@keras_attn_export("keras_attn.models.gpt_classifier")
def gpt_classifier(
    backbone: keras.Model, num_classes: int, dropout: float = 0.1, name: str = "gpt_classifier"
) -> keras.Model:
    """A sequence classifier on the last real token of a `gpt` model (shares its layers).

        h = decoder(E[ids] + P)                             (batch, T, d) the backbone's layers
        last = h[b, n_b - 1]                                n_b = number of non-zero ids of row b
        logits = Dropout(last) W_c + b_c                    (batch, num_classes) float32

    As in Radford et al. (2018, section 3.2), the input is tokenized like the language model's
    training sequences, start token first and end token last, and the final hidden state of the
    last token, the only one that has attended to the whole input, feeds a linear layer. Ids are
    right-padded with 0; padding after the last token changes nothing (causal attention).

    Args:
        backbone: a model returned by `gpt` (pre-trained or not); its "embedding" and "decoder"
            layers are reused, so fine-tuning the classifier updates them.
        num_classes: number of classes.
        dropout: dropout before the classification layer.
        name: model name.

    Returns:
        A `keras.Model` from `token_ids` (int32 `(batch, T)`, right-padded with 0) to float32
        logits `(batch, num_classes)`.

    Example:

    >>> classifier = gpt_classifier(gpt(30, num_layers=1, d_model=8, num_heads=2, ff_dim=16), 3)
    >>> tuple(classifier.output.shape)
    (None, 3)

    References:
        Radford et al., 2018, "Improving Language Understanding by Generative Pre-Training".
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes <= 0:
        raise ValueError(f"Expected a positive num_classes. Received: num_classes={num_classes!r}")
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    embedded = backbone.get_layer(EMBEDDING)(token_ids)  # carries the mask token_ids != 0
    hidden = backbone.get_layer(DECODER)(embedded)
    last = TokenPooling("last", name=LAST_TOKEN)(hidden)
    last = keras.layers.Dropout(dropout, name="classifier_dropout")(last)
    logits = keras.layers.Dense(num_classes, dtype="float32", name=CLASSIFIER)(last)
    return keras.Model(token_ids, logits, name=name)
