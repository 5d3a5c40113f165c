"""Functional builders of a BERT-style encoder with a masked-LM head, and its [CLS] classifier."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.transformer.transformer_encoder import TransformerEncoder
from keras_attn.models._transformer_parts import (
    check_heads_divide_width,
    float32_logits,
    learned_position_embedding,
    stack_arguments,
)

EMBEDDING = "embedding"
EMBEDDING_NORM = "embedding_norm"
ENCODER = "encoder"
MLM_TRANSFORM = "mlm_transform"
MLM_NORM = "mlm_norm"
MLM_LOGITS = "mlm_logits"
SEQUENCE_OUTPUT = "sequence_output"


@keras_attn_export("keras_attn.models.bert")
def bert(
    vocabulary_size: int,
    num_layers: int = 2,
    d_model: int = 128,
    num_heads: int = 4,
    ff_dim: int = 512,
    max_length: int = 512,
    dropout: float = 0.1,
    name: str = "bert",
) -> keras.Model:
    """A BERT-style bidirectional encoder with a tied masked-language-model head.

        token ids (batch, T) → LN(E[ids] + P[0..T-1])       learned positions, no scaling
        → N post-LN encoder blocks (GELU FFN) → h           (batch, T, d) "sequence_output"
        MLM head: LN(GELU(h W + b)) E^T                     (batch, T, V) float32 "mlm_logits"

    Every position attends to every real position (no causal mask); id 0 is padding and gets
    zero attention. The MLM projection is tied to the token embedding `E` (no output bias).
    Masked-LM training replaces some input ids by a [MASK] id and scores `mlm_logits` at those
    positions only. Position 0 holds the [CLS] token whose output `bert_classifier` pools.

    Args:
        vocabulary_size: number of token ids, padding id 0 included.
        num_layers: encoder blocks.
        d_model: model width `d`.
        num_heads: attention heads; must divide `d_model`.
        ff_dim: feed-forward hidden width.
        max_length: number of learned positions.
        dropout: dropout on the embeddings, residual branches and attention weights.
        name: model name.

    Returns:
        A `keras.Model` from `token_ids` (int32 `(batch, T)`) to a dict
        `{"sequence_output": (batch, T, d), "mlm_logits": (batch, T, V) float32}`.

    Example:

    >>> model = bert(30, num_layers=1, d_model=8, num_heads=2, ff_dim=16, max_length=10)
    >>> {key: tuple(value.shape) for key, value in sorted(model.output.items())}
    {'mlm_logits': (None, None, 30), 'sequence_output': (None, None, 8)}

    References:
        Devlin et al., 2018, "BERT: Pre-training of Deep Bidirectional Transformers for Language
        Understanding", arXiv:1810.04805.
    """
    check_heads_divide_width(d_model, num_heads)
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    embedding = learned_position_embedding(vocabulary_size, d_model, max_length, dropout, EMBEDDING)
    x = keras.layers.LayerNormalization(epsilon=1e-12, name=EMBEDDING_NORM)(embedding(token_ids))
    hidden = TransformerEncoder(
        **stack_arguments(num_layers, num_heads, ff_dim, dropout, activation="gelu"), name=ENCODER
    )(x)
    transformed = keras.layers.Dense(d_model, activation="gelu", name=MLM_TRANSFORM)(hidden)
    transformed = keras.layers.LayerNormalization(epsilon=1e-12, name=MLM_NORM)(transformed)
    logits = float32_logits(embedding(transformed, reverse=True), MLM_LOGITS)
    outputs = {SEQUENCE_OUTPUT: hidden, MLM_LOGITS: logits}
    return keras.Model(token_ids, outputs, name=name)


@keras_attn_export("keras_attn.models.bert_classifier")
def bert_classifier(
    backbone: keras.Model, num_classes: int, dropout: float = 0.1, name: str = "bert_classifier"
) -> keras.Model:
    """A sequence classifier on the [CLS] position of a `bert` model (shares its layers).

        pooled = tanh(h[:, 0] W_p + b_p)                    (batch, d)   BERT's pooler
        logits = Dropout(pooled) W_c + b_c                  (batch, num_classes) float32

    Args:
        backbone: a model returned by `bert` (pre-trained or not); its layers are reused, so
            fine-tuning the classifier updates them.
        num_classes: number of classes.
        dropout: dropout before the classification layer.
        name: model name.

    Returns:
        A `keras.Model` from `token_ids` (int32 `(batch, T)`, [CLS] first) to float32 logits.

    Example:

    >>> classifier = bert_classifier(bert(30, num_layers=1, d_model=8, num_heads=2, ff_dim=16), 3)
    >>> tuple(classifier.output.shape)
    (None, 3)
    """
    if num_classes <= 0:
        raise ValueError(f"Expected a positive num_classes. Received: num_classes={num_classes}")
    hidden = backbone.output[SEQUENCE_OUTPUT]
    d_model = hidden.shape[-1]
    pooled = keras.layers.Dense(d_model, activation="tanh", name="pooler")(hidden[:, 0])
    pooled = keras.layers.Dropout(dropout, name="classifier_dropout")(pooled)
    logits = keras.layers.Dense(num_classes, dtype="float32", name="classifier")(pooled)
    return keras.Model(backbone.input, logits, name=name)
