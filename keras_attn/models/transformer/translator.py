"""Functional builder of the encoder–decoder Transformer translator (Vaswani et al. 2017)."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.embedding.token_and_position_embedding import TokenAndPositionEmbedding
from keras_attn.layers.transformer.transformer_decoder import TransformerDecoder
from keras_attn.layers.transformer.transformer_encoder import TransformerEncoder
from keras_attn.models.transformer.parts import (
    check_heads_divide_width,
    float32_logits,
    stack_arguments,
)

# Layer names the decoding view (`TransformerTranslatorSteps`) looks up after a reload.
SOURCE_EMBEDDING = "source_embedding"
TARGET_EMBEDDING = "target_embedding"
SHARED_EMBEDDING = "shared_embedding"
ENCODER = "encoder"
DECODER = "decoder"
LOGITS = "logits"


@keras_attn_export("keras_attn.models.transformer_translator")
def transformer_translator(
    source_vocab_size: int,
    target_vocab_size: int,
    num_layers: int = 2,
    d_model: int = 128,
    num_heads: int = 4,
    ff_dim: int = 512,
    dropout: float = 0.1,
    normalize_first: bool = False,
    share_embeddings: bool = False,
    name: str = "transformer_translator",
) -> keras.Model:
    """The Transformer encoder–decoder translator as a Keras functional model.

        source ids (batch, T_x) → E_x[ids]·sqrt(d) + PE → N encoder blocks → memory (batch, T_x, d)
        target ids (batch, T_y) → E_y[ids]·sqrt(d) + PE → N decoder blocks (causal self-attention,
            cross-attention to memory) → h (batch, T_y, d)
        logits = h E_y^T                                   (batch, T_y, target_vocab_size) float32

    The output projection is tied to the target embedding (Press & Wolf 2017; section 3.4 of
    Vaswani et al.); with `share_embeddings=True` one matrix serves source, target and output
    (both vocabularies must then be the same size). Positions use the sinusoidal encoding of
    Vaswani et al. (section 3.5). Id 0 is padding on both sides: padded source positions get
    zero cross-attention and padded target positions carry a Keras mask to the loss.

    Args:
        source_vocab_size, target_vocab_size: vocabulary sizes, padding id 0 included.
        num_layers: encoder blocks and decoder blocks (`N`).
        d_model: model width `d`.
        num_heads: attention heads; must divide `d_model`.
        ff_dim: feed-forward hidden width `d_ff`.
        dropout: dropout on the embeddings, on every residual branch and on attention weights.
        normalize_first: pre-LN blocks (plus a final LayerNorm per stack) instead of post-LN.
        share_embeddings: one embedding matrix for source and target.
        name: model name.

    Returns:
        A `keras.Model` with inputs `{"source_ids", "target_ids"}` (int32) and float32 logits.

    Example:

    >>> model = transformer_translator(50, 60, num_layers=1, d_model=8, num_heads=2, ff_dim=16)
    >>> [tuple(t.shape) for t in model.inputs], tuple(model.output.shape)
    ([(None, None), (None, None)], (None, None, 60))

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762.
        Press & Wolf, 2017, "Using the Output Embedding to Improve Language Models",
        arXiv:1608.05859.
    """
    if share_embeddings and source_vocab_size != target_vocab_size:
        raise ValueError(
            "share_embeddings=True needs one vocabulary size for both sides. Received: "
            f"source_vocab_size={source_vocab_size}, target_vocab_size={target_vocab_size}"
        )
    check_heads_divide_width(d_model, num_heads)
    source_ids = keras.Input((None,), dtype="int32", name="source_ids")
    target_ids = keras.Input((None,), dtype="int32", name="target_ids")

    def embedding(vocab_size: int, layer_name: str) -> TokenAndPositionEmbedding:
        return TokenAndPositionEmbedding(
            vocab_size, d_model, mask_zero=True, dropout=dropout, name=layer_name
        )

    if share_embeddings:
        source_embedding = target_embedding = embedding(target_vocab_size, SHARED_EMBEDDING)
    else:
        source_embedding = embedding(source_vocab_size, SOURCE_EMBEDDING)
        target_embedding = embedding(target_vocab_size, TARGET_EMBEDDING)
    stack = stack_arguments(num_layers, num_heads, ff_dim, dropout, normalize_first=normalize_first)
    memory = TransformerEncoder(**stack, name=ENCODER)(source_embedding(source_ids))
    hidden = TransformerDecoder(**stack, name=DECODER)(target_embedding(target_ids), memory)
    logits = float32_logits(target_embedding(hidden, reverse=True), LOGITS)
    return keras.Model({"source_ids": source_ids, "target_ids": target_ids}, logits, name=name)
