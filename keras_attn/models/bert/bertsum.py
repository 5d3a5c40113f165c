"""Functional builder of a BertSum-style translator (a BERT encoder under a new decoder)."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.embedding.token_and_position_embedding import TokenAndPositionEmbedding
from keras_attn.layers.transformer.transformer_decoder import TransformerDecoder
from keras_attn.layers.transformer.transformer_encoder import TransformerEncoder
from keras_attn.models.transformer.parts import (
    check_heads_divide_width,
    float32_logits,
    learned_position_embedding,
    stack_arguments,
)

# The encoder's layers carry `bert`'s names, so a pre-trained `bert` run loads into them.
EMBEDDING = "embedding"
SEGMENT_EMBEDDING = "segment_embedding"
EMBEDDING_NORM = "embedding_norm"
ENCODER = "encoder"
DECODER_EMBEDDING = "decoder_embedding"
DECODER = "decoder"
LOGITS = "logits"

BERTSUM_ENCODER_LAYERS = (EMBEDDING, SEGMENT_EMBEDDING, EMBEDDING_NORM, ENCODER)
"""Names of the pre-trained encoder's layers (`segment_embedding` only exists with segments);
every other layer of a `bertsum_translator` is the new decoder."""


@keras_attn_export("keras_attn.models.bertsum_translator")
def bertsum_translator(
    source_vocabulary_size: int,
    target_vocabulary_size: int,
    num_layers: int = 2,
    d_model: int = 128,
    num_heads: int = 4,
    ff_dim: int = 512,
    decoder_layers: int | None = None,
    max_length: int = 512,
    dropout: float = 0.1,
    num_segments: int = 0,
    name: str = "bertsum_translator",
) -> keras.Model:
    """A BertSumAbs-style encoder–decoder: BERT's encoder under a Transformer decoder.

        x (batch, T_x) source ids → LN(E[x] + P_x (+ S[0])) → N post-LN GELU encoder blocks
            → memory (batch, T_x, d)                                   BERT's encoder
        y (batch, T_y) target ids → E_y[y]·sqrt(d) + PE → M pre-LN GELU decoder blocks
            (causal self-attention, cross-attention to memory) + final LN → h
        logits = h E_y^T                                               (batch, T_y, V_y) float32

    The encoder is `keras_attn.models.bert`'s, under its layer names ("embedding",
    "segment_embedding" when `num_segments > 0`, every source token in segment 0,
    "embedding_norm", "encoder"; listed in `BERTSUM_ENCODER_LAYERS`), so a pre-trained `bert`
    run's weights load into it by layer name; BERT's masked-LM head is not part of it. The
    decoder is new and randomly initialised, with its own target vocabulary and embedding
    ("decoder_embedding", sinusoidal positions), tied to the output projection, as in Liu &
    Lapata's abstractive model. Because the encoder is pre-trained and the decoder is not, they
    are meant to be trained with separate optimizers (a smaller learning rate and a longer
    warm-up for the encoder); the layer names in `BERTSUM_ENCODER_LAYERS` select the encoder's
    variables. Id 0 is padding on both sides.

    Args:
        source_vocabulary_size: BERT's vocabulary size, padding id 0 included.
        target_vocabulary_size: the decoder's vocabulary size, padding id 0 included.
        num_layers: encoder blocks (BERT's `num_layers`).
        d_model: model width `d` of both stacks.
        num_heads: attention heads of both stacks; must divide `d_model`.
        ff_dim: feed-forward hidden width of both stacks.
        decoder_layers: decoder blocks; None for `num_layers`.
        max_length: BERT's number of learned source positions.
        dropout: dropout on the embeddings, residual branches and attention weights.
        num_segments: BERT's number of segment (token-type) embeddings; 0 for none.
        name: model name.

    Returns:
        A `keras.Model` with inputs `{"source_ids", "target_ids"}` (int32) and float32 logits
        `(batch, T_y, target_vocabulary_size)`, decoded by `keras_attn.models.BertSumSteps`
        (`TransformerTranslatorSteps`).

    Example:

    >>> model = bertsum_translator(40, 30, num_layers=1, d_model=8, num_heads=2, ff_dim=16,
    ...                            max_length=10, num_segments=2)
    >>> tuple(model.output.shape)
    (None, None, 30)

    References:
        Liu & Lapata, 2019, "Text Summarization with Pretrained Encoders", arXiv:1908.08345.
        Devlin et al., 2018, "BERT: Pre-training of Deep Bidirectional Transformers for Language
        Understanding", arXiv:1810.04805.
    """
    check_heads_divide_width(d_model, num_heads)
    if decoder_layers is None:
        decoder_layers = num_layers
    if decoder_layers <= 0:
        raise ValueError(
            f"Expected a positive decoder_layers. Received: decoder_layers={decoder_layers}"
        )
    if num_segments < 0:
        raise ValueError(f"Expected num_segments >= 0. Received: num_segments={num_segments}")
    source_ids = keras.Input((None,), dtype="int32", name="source_ids")
    target_ids = keras.Input((None,), dtype="int32", name="target_ids")
    source_mask = ops.not_equal(source_ids, 0)  # (batch, T_x)
    target_mask = ops.not_equal(target_ids, 0)  # (batch, T_y)

    embedding = learned_position_embedding(
        source_vocabulary_size, d_model, max_length, dropout, EMBEDDING
    )
    source = embedding(source_ids)
    if num_segments > 0:
        segment_embedding = keras.layers.Embedding(num_segments, d_model, name=SEGMENT_EMBEDDING)
        source = source + segment_embedding(ops.zeros_like(source_ids))
    source = keras.layers.LayerNormalization(epsilon=1e-12, name=EMBEDDING_NORM)(source)
    encoder_stack = stack_arguments(num_layers, num_heads, ff_dim, dropout, activation="gelu")
    memory = TransformerEncoder(**encoder_stack, name=ENCODER)(source, inputs_mask=source_mask)

    decoder_embedding = TokenAndPositionEmbedding(
        target_vocabulary_size, d_model, mask_zero=True, dropout=dropout, name=DECODER_EMBEDDING
    )
    decoder_stack = stack_arguments(
        decoder_layers, num_heads, ff_dim, dropout, activation="gelu", normalize_first=True
    )
    hidden = TransformerDecoder(**decoder_stack, name=DECODER)(
        decoder_embedding(target_ids),
        memory,
        inputs_mask=target_mask,
        memory_mask=source_mask,
    )
    logits = float32_logits(decoder_embedding(hidden, reverse=True), LOGITS)
    return keras.Model({"source_ids": source_ids, "target_ids": target_ids}, logits, name=name)
