"""Construction shared by the Transformer model builders (`bert`, `gpt`, `bart`,
`transformer_translator`): argument checks, the token embedding, the stack arguments and the
float32 logits."""

from __future__ import annotations

import keras

from keras_attn.layers.embedding.token_and_position_embedding import TokenAndPositionEmbedding


def check_heads_divide_width(d_model: int, num_heads: int) -> None:
    """A ValueError quoting both values unless `num_heads` divides `d_model`."""
    if d_model % num_heads:
        raise ValueError(
            f"Expected num_heads to divide d_model. Received: d_model={d_model}, "
            f"num_heads={num_heads}"
        )


def learned_position_embedding(
    vocabulary_size: int, d_model: int, max_length: int, dropout: float, name: str
) -> TokenAndPositionEmbedding:
    """Token embedding plus learned positions, unscaled, id 0 masked (BERT, GPT, BART)."""
    return TokenAndPositionEmbedding(
        vocabulary_size,
        d_model,
        max_length=max_length,
        position_encoding="learned",
        scale_embeddings=False,
        mask_zero=True,
        dropout=dropout,
        name=name,
    )


def stack_arguments(
    num_layers: int, num_heads: int, ff_dim: int, dropout: float, **options
) -> dict:
    """Keyword arguments of a `TransformerEncoder` / `TransformerDecoder` whose residual and
    attention dropouts are both `dropout`; `options` (e.g. `activation`, `normalize_first`) are
    passed through unchanged."""
    return dict(
        num_layers=num_layers,
        num_heads=num_heads,
        intermediate_dim=ff_dim,
        dropout=dropout,
        attention_dropout=dropout,
        **options,
    )


def float32_logits(logits, name: str):
    """`logits` through a linear float32 layer named `name`: float32 under any precision policy
    (the softmax and the loss need it)."""
    return keras.layers.Activation("linear", dtype="float32", name=name)(logits)
