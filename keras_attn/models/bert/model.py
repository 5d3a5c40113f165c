"""Functional builders of a BERT-style encoder with a masked-LM head, its pre-training model
(masked LM + next-sentence prediction) and its sequence and token classifiers."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.pooling.token_pooling import TokenPooling
from keras_attn.layers.transformer.transformer_encoder import TransformerEncoder
from keras_attn.models.transformer.parts import (
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
SEGMENT_EMBEDDING = "segment_embedding"
CLS_TOKEN = "cls_token"
POOLER = "pooler"
NSP_LOGITS = "nsp_logits"
CLASSIFIER = "classifier"
TOKEN_CLASSIFIER = "token_classifier"


def _check_positive(name: str, value: int) -> None:
    """A ValueError quoting `value` unless it is a positive int."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"Expected a positive {name}. Received: {name}={value!r}")


def _pooled_cls(hidden):
    """BERT's pooler on the [CLS] position: `tanh(h[:, 0] W_p + b_p)` `(batch, d)`, "pooler"."""
    cls = TokenPooling("first", name=CLS_TOKEN)(hidden)
    return keras.layers.Dense(hidden.shape[-1], activation="tanh", name=POOLER)(cls)


@keras_attn_export("keras_attn.models.bert")
def bert(
    vocabulary_size: int,
    num_layers: int = 2,
    d_model: int = 128,
    num_heads: int = 4,
    ff_dim: int = 512,
    max_length: int = 512,
    dropout: float = 0.1,
    num_segments: int = 0,
    name: str = "bert",
) -> keras.Model:
    """A BERT-style bidirectional encoder with a tied masked-language-model head.

        token ids (batch, T) → LN(E[ids] + P[0..T-1] (+ S[segment ids]))   learned, no scaling
        → N post-LN encoder blocks (GELU FFN) → h           (batch, T, d) "sequence_output"
        MLM head: LN(GELU(h W + b)) E^T                     (batch, T, V) float32 "mlm_logits"

    Every position attends to every real position (no causal mask); id 0 is padding and gets
    zero attention. The MLM projection is tied to the token embedding `E` (no output bias).
    Masked-LM training replaces some input ids by a [MASK] id and scores `mlm_logits` at those
    positions only. Position 0 holds the [CLS] token whose output `bert_classifier` pools.

    With `num_segments > 0` the input is a pair of sequences packed as `[CLS] A [SEP] B [SEP]`
    and a learned segment (token-type) embedding `S` `(num_segments, d)` of each position's
    segment id (0 for `[CLS] A [SEP]`, 1 for `B [SEP]`) is added to the token and position
    embeddings before their LayerNorm (Devlin et al., 2018, section 3.2). With
    `num_segments=0` there is no segment input and no segment embedding.

    Args:
        vocabulary_size: number of token ids, padding id 0 included.
        num_layers: encoder blocks.
        d_model: model width `d`.
        num_heads: attention heads; must divide `d_model`.
        ff_dim: feed-forward hidden width.
        max_length: number of learned positions.
        dropout: dropout on the embeddings, residual branches and attention weights.
        num_segments: number of segment ids (2 for sentence pairs); 0 for single sequences.
        name: model name.

    Returns:
        A `keras.Model` to a dict `{"sequence_output": (batch, T, d), "mlm_logits": (batch, T, V)
        float32}`. Its input is `token_ids` (int32 `(batch, T)`) when `num_segments=0`, else a
        dict `{"token_ids", "segment_ids"}` of two int32 `(batch, T)` tensors.

    Example:

    >>> model = bert(30, num_layers=1, d_model=8, num_heads=2, ff_dim=16, max_length=10)
    >>> {key: tuple(value.shape) for key, value in sorted(model.output.items())}
    {'mlm_logits': (None, None, 30), 'sequence_output': (None, None, 8)}

    References:
        Devlin et al., 2018, "BERT: Pre-training of Deep Bidirectional Transformers for Language
        Understanding", arXiv:1810.04805.
    """
    check_heads_divide_width(d_model, num_heads)
    if isinstance(num_segments, bool) or not isinstance(num_segments, int) or num_segments < 0:
        raise ValueError(
            f"Expected num_segments to be an int >= 0. Received: num_segments={num_segments!r}"
        )
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    inputs = token_ids
    embedding = learned_position_embedding(vocabulary_size, d_model, max_length, dropout, EMBEDDING)
    x = embedding(token_ids)  # carries the mask token_ids != 0
    padding = {}
    if num_segments:
        segment_ids = keras.Input((None,), dtype="int32", name="segment_ids")
        inputs = {"token_ids": token_ids, "segment_ids": segment_ids}
        segments = keras.layers.Embedding(num_segments, d_model, name=SEGMENT_EMBEDDING)
        x = keras.layers.Add(name="embedding_sum")([x, segments(segment_ids)])
        # A Keras merge drops the mask when one input has none: the encoder gets it explicitly.
        padding["mask"] = ops.not_equal(token_ids, 0)
    x = keras.layers.LayerNormalization(epsilon=1e-12, name=EMBEDDING_NORM)(x)
    hidden = TransformerEncoder(
        **stack_arguments(num_layers, num_heads, ff_dim, dropout, activation="gelu"), name=ENCODER
    )(x, **padding)
    transformed = keras.layers.Dense(d_model, activation="gelu", name=MLM_TRANSFORM)(hidden)
    transformed = keras.layers.LayerNormalization(epsilon=1e-12, name=MLM_NORM)(transformed)
    logits = float32_logits(embedding(transformed, reverse=True), MLM_LOGITS)
    outputs = {SEQUENCE_OUTPUT: hidden, MLM_LOGITS: logits}
    return keras.Model(inputs, outputs, name=name)


@keras_attn_export("keras_attn.models.bert_pretraining")
def bert_pretraining(backbone: keras.Model, name: str = "bert_pretraining") -> keras.Model:
    """BERT's pre-training model: a `bert` backbone with a next-sentence-prediction head.

        pooled = tanh(h[:, 0] W_p + b_p)                    (batch, d) "pooler" on [CLS]
        nsp_logits = pooled W_n + b_n                       (batch, 2) float32

    Class 1 of `nsp_logits` means "B follows A", class 0 "B is a random sentence".

    The masked-LM logits and the sequence output are the backbone's. The pooler is named like
    `bert_classifier`'s, so a classifier that loads pre-trained weights by layer name starts from
    the pooler trained on next-sentence prediction, as in BERT.

    Args:
        backbone: a model returned by `bert`, with `num_segments > 0` for sentence pairs; its
            layers are reused.
        name: model name.

    Returns:
        A `keras.Model` with the backbone's inputs to a dict `{"mlm_logits": (batch, T, V),
        "nsp_logits": (batch, 2), "sequence_output": (batch, T, d)}` (logits float32).

    Example:

    >>> backbone = bert(30, num_layers=1, d_model=8, num_heads=2, ff_dim=16, num_segments=2)
    >>> model = bert_pretraining(backbone)
    >>> sorted(model.input), tuple(model.output["nsp_logits"].shape)
    (['segment_ids', 'token_ids'], (None, 2))

    References:
        Devlin et al., 2018, "BERT: Pre-training of Deep Bidirectional Transformers for Language
        Understanding", arXiv:1810.04805, section 3.1 (masked LM, next sentence prediction).
    """
    hidden = backbone.output[SEQUENCE_OUTPUT]
    nsp_logits = keras.layers.Dense(2, dtype="float32", name=NSP_LOGITS)(_pooled_cls(hidden))
    outputs = {
        MLM_LOGITS: backbone.output[MLM_LOGITS],
        NSP_LOGITS: nsp_logits,
        SEQUENCE_OUTPUT: hidden,
    }
    return keras.Model(backbone.input, outputs, name=name)


@keras_attn_export("keras_attn.models.bert_classifier")
def bert_classifier(
    backbone: keras.Model, num_classes: int, dropout: float = 0.1, name: str = "bert_classifier"
) -> keras.Model:
    """A sequence classifier on the [CLS] position of a `bert` model (shares its layers).

        pooled = tanh(h[:, 0] W_p + b_p)                    (batch, d)   BERT's pooler
        logits = Dropout(pooled) W_c + b_c                  (batch, num_classes) float32

    Args:
        backbone: a model returned by `bert` (pre-trained or not, with or without segments); its
            layers are reused, so fine-tuning the classifier updates them.
        num_classes: number of classes.
        dropout: dropout before the classification layer.
        name: model name.

    Returns:
        A `keras.Model` with the backbone's inputs (`token_ids` int32 `(batch, T)`, [CLS] first,
        or the dict with `segment_ids`) to float32 logits `(batch, num_classes)`.

    Example:

    >>> classifier = bert_classifier(bert(30, num_layers=1, d_model=8, num_heads=2, ff_dim=16), 3)
    >>> tuple(classifier.output.shape)
    (None, 3)
    """
    _check_positive("num_classes", num_classes)
    pooled = _pooled_cls(backbone.output[SEQUENCE_OUTPUT])
    pooled = keras.layers.Dropout(dropout, name="classifier_dropout")(pooled)
    logits = keras.layers.Dense(num_classes, dtype="float32", name=CLASSIFIER)(pooled)
    return keras.Model(backbone.input, logits, name=name)


@keras_attn_export("keras_attn.models.bert_token_classifier")
def bert_token_classifier(
    backbone: keras.Model,
    num_tags: int,
    dropout: float = 0.1,
    name: str = "bert_token_classifier",
) -> keras.Model:
    """A per-token tagger on the sequence output of a `bert` model (shares its layers).

        logits = Dropout(h) W_t + b_t                       (batch, T, num_tags) float32

    Each position's final hidden state is classified on its own (Devlin et al., 2018,
    section 4.3, named entity recognition). The logits carry the backbone's padding mask
    (`token_ids != 0`), so a Keras loss skips padded positions.

    Args:
        backbone: a model returned by `bert` (pre-trained or not, with or without segments); its
            layers are reused.
        num_tags: number of tags.
        dropout: dropout before the tagging layer.
        name: model name.

    Returns:
        A `keras.Model` with the backbone's inputs to float32 logits `(batch, T, num_tags)`.

    Example:

    >>> tagger = bert_token_classifier(bert(30, num_layers=1, d_model=8, num_heads=2, ff_dim=16), 5)
    >>> tuple(tagger.output.shape)
    (None, None, 5)
    """
    _check_positive("num_tags", num_tags)
    hidden = keras.layers.Dropout(dropout, name="token_classifier_dropout")(
        backbone.output[SEQUENCE_OUTPUT]
    )
    logits = keras.layers.Dense(num_tags, dtype="float32", name=TOKEN_CLASSIFIER)(hidden)
    return keras.Model(backbone.input, logits, name=name)
