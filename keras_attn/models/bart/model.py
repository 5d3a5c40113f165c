"""Functional builders of a BART-style denoising seq2seq model, its classification head and its
translators."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.transformer.transformer_decoder import TransformerDecoder
from keras_attn.layers.transformer.transformer_encoder import TransformerEncoder
from keras_attn.models.transformer.parts import (
    check_heads_divide_width,
    float32_logits,
    learned_position_embedding,
    stack_arguments,
)

EMBEDDING = "embedding"
ENCODER_EMBEDDING_NORM = "encoder_embedding_norm"
DECODER_EMBEDDING_NORM = "decoder_embedding_norm"
ENCODER = "encoder"
DECODER = "decoder"
LOGITS = "logits"
SOURCE_EMBEDDING = "source_embedding"
SOURCE_ENCODER = "source_encoder"
TOKEN_CLASSIFIER = "token_classifier"


def _decoder_hidden(backbone: keras.Model, source_ids, target_ids):
    """The decoder output `(batch, T_y, d)` of `backbone`'s layers on new inputs."""
    embedding = backbone.get_layer(EMBEDDING)
    source = backbone.get_layer(ENCODER_EMBEDDING_NORM)(embedding(source_ids))
    memory = backbone.get_layer(ENCODER)(source)
    target = backbone.get_layer(DECODER_EMBEDDING_NORM)(embedding(target_ids))
    return backbone.get_layer(DECODER)(target, memory)


@keras_attn_export("keras_attn.models.bart")
def bart(
    vocabulary_size: int,
    num_layers: int = 2,
    d_model: int = 128,
    num_heads: int = 4,
    ff_dim: int = 512,
    max_length: int = 512,
    dropout: float = 0.1,
    name: str = "bart",
) -> keras.Model:
    """A BART-style denoising encoder–decoder with one embedding for source, target and output.

        x (batch, T_x) noised document → LN(E[x] + P_x) → N post-LN encoder blocks → memory
        y (batch, T_y) original document, shifted right (START first)
          → LN(E[y] + P_y) → N post-LN decoder blocks (causal, cross-attention to memory) → h
        logits = h E^T                                     (batch, T_y, V) float32

    One token embedding `E` with learned positions (no sqrt(d) scaling) serves both stacks and
    the tied output projection; each stack normalises its embeddings. Pre-training reconstructs
    the original document from a noised one (`keras_attn.text.noising`: token masking, deletion,
    text infilling, sentence permutation, document rotation). Id 0 is padding on both sides.

    Args:
        vocabulary_size: number of token ids, padding id 0 included.
        num_layers: encoder blocks and decoder blocks.
        d_model: model width `d`.
        num_heads: attention heads; must divide `d_model`.
        ff_dim: feed-forward hidden width.
        max_length: number of learned positions (each side).
        dropout: dropout on the embeddings, residual branches and attention weights.
        name: model name.

    Returns:
        A `keras.Model` with inputs `{"source_ids", "target_ids"}` (int32) and float32 logits.

    Example:

    >>> model = bart(30, num_layers=1, d_model=8, num_heads=2, ff_dim=16, max_length=10)
    >>> tuple(model.output.shape)
    (None, None, 30)

    References:
        Lewis et al., 2019, "BART: Denoising Sequence-to-Sequence Pre-training for Natural
        Language Generation, Translation, and Comprehension", arXiv:1910.13461.
    """
    check_heads_divide_width(d_model, num_heads)
    source_ids = keras.Input((None,), dtype="int32", name="source_ids")
    target_ids = keras.Input((None,), dtype="int32", name="target_ids")
    embedding = learned_position_embedding(vocabulary_size, d_model, max_length, dropout, EMBEDDING)
    stack = stack_arguments(num_layers, num_heads, ff_dim, dropout, activation="gelu")
    source = keras.layers.LayerNormalization(name=ENCODER_EMBEDDING_NORM)(embedding(source_ids))
    return _bart_graph(source_ids, target_ids, source, embedding, stack, name)


def _bart_graph(source_ids, target_ids, source, embedding, stack: dict, name: str) -> keras.Model:
    """BART from the normalised encoder input `source` on: encoder, decoder, tied logits."""
    memory = TransformerEncoder(**stack, name=ENCODER)(source)
    target = keras.layers.LayerNormalization(name=DECODER_EMBEDDING_NORM)(embedding(target_ids))
    hidden = TransformerDecoder(**stack, name=DECODER)(target, memory)
    logits = float32_logits(embedding(hidden, reverse=True), LOGITS)
    return keras.Model({"source_ids": source_ids, "target_ids": target_ids}, logits, name=name)


@keras_attn_export("keras_attn.models.bart_classifier")
def bart_classifier(
    backbone: keras.Model, num_classes: int, dropout: float = 0.1, name: str = "bart_classifier"
) -> keras.Model:
    """A sequence classifier on the last decoder token of a `bart` model (shares its layers).

    As in BART (section 3.2), the same ids feed the encoder and the decoder, and the decoder's
    output at the last real (non-padding) token, which has attended to the whole sequence, is
    classified:

        h = decoder(ids, encoder(ids))                     (batch, T, d)
        last = h[b, n_b - 1]                               n_b = number of non-zero ids of row b
        logits = Dropout(tanh(last W_p + b_p)) W_c + b_c   (batch, num_classes) float32

    Args:
        backbone: a model returned by `bart`; its layers are reused (fine-tuning updates them).
        num_classes: number of classes.
        dropout: dropout before the classification layer.
        name: model name.

    Returns:
        A `keras.Model` from `token_ids` (int32 `(batch, T)`, right-padded with 0) to logits.

    Example:

    >>> classifier = bart_classifier(bart(30, num_layers=1, d_model=8, num_heads=2, ff_dim=16), 2)
    >>> tuple(classifier.output.shape)
    (None, 2)
    """
    if num_classes <= 0:
        raise ValueError(f"Expected a positive num_classes. Received: num_classes={num_classes}")
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    hidden = _decoder_hidden(backbone, token_ids, token_ids)
    lengths = ops.sum(ops.cast(ops.not_equal(token_ids, 0), "int32"), axis=1)  # (batch,)
    last_index = ops.reshape(ops.maximum(lengths - 1, 0), (-1, 1, 1))
    last = ops.take_along_axis(hidden, last_index, axis=1)[:, 0]  # (batch, d)
    pooled = keras.layers.Dense(hidden.shape[-1], activation="tanh", name="pooler")(last)
    pooled = keras.layers.Dropout(dropout, name="classifier_dropout")(pooled)
    logits = keras.layers.Dense(num_classes, dtype="float32", name="classifier")(pooled)
    return keras.Model(token_ids, logits, name=name)


@keras_attn_export("keras_attn.models.bart_token_classifier")
def bart_token_classifier(
    backbone: keras.Model, num_tags: int, dropout: float = 0.1, name: str = "bart_tagger"
) -> keras.Model:
    """A per-token tagger on the decoder states of a `bart` model (shares its layers).

    BART's token classification (Lewis et al., 2019, section 3.2): the whole sequence feeds the
    encoder and the decoder, and the decoder's top hidden state at each position classifies that
    position's token:

        h = decoder(ids, encoder(ids))                     (batch, T, d)
        logits = Dropout(h) W_t + b_t                      (batch, T, num_tags) float32

    The decoder is causal, so position `t`'s state has read the tokens up to `t` through its
    self-attention and the whole sequence through its cross-attention.

    Args:
        backbone: a model returned by `bart`; its layers are reused (fine-tuning updates them).
        num_tags: number of tags.
        dropout: dropout before the tagging layer.
        name: model name.

    Returns:
        A `keras.Model` from `token_ids` (int32 `(batch, T)`, right-padded with 0) to logits.

    Example:

    >>> tagger = bart_token_classifier(bart(30, num_layers=1, d_model=8, num_heads=2, ff_dim=16), 5)
    >>> tuple(tagger.output.shape)
    (None, None, 5)
    """
    if num_tags <= 0:
        raise ValueError(f"Expected a positive num_tags. Received: num_tags={num_tags}")
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    hidden = _decoder_hidden(backbone, token_ids, token_ids)
    hidden = keras.layers.Dropout(dropout, name="token_classifier_dropout")(hidden)
    logits = keras.layers.Dense(num_tags, dtype="float32", name=TOKEN_CLASSIFIER)(hidden)
    return keras.Model(token_ids, logits, name=name)


@keras_attn_export("keras_attn.models.bart_translator")
def bart_translator(
    source_vocabulary_size: int,
    target_vocabulary_size: int,
    num_layers: int = 2,
    d_model: int = 128,
    num_heads: int = 4,
    ff_dim: int = 512,
    max_length: int = 512,
    dropout: float = 0.1,
    new_source_encoder_layers: int = 0,
    name: str = "bart_translator",
) -> keras.Model:
    """A translator fine-tuned from `bart`: the plain model, or BART under a new source encoder.

    Plain fine-tune (`new_source_encoder_layers=0`): the `bart` graph itself, with the same layer
    names, so a pre-trained `bart` model's weights load by layer name. Source and target share
    BART's one vocabulary (as in mBART, Liu et al. 2020), so both sizes must be equal.

    New source encoder (`new_source_encoder_layers=K > 0`; Lewis et al. 2019, section 3.3):
    BART's encoder input embedding is replaced by a new, randomly initialised encoder over a
    source vocabulary of its own:

        x (batch, T_x) source ids → E_s[x] + P_s        "source_embedding" (new, learned positions)
          → K post-LN encoder blocks                      "source_encoder" (new)
          → LN → BART encoder → memory                    "encoder_embedding_norm", "encoder"
        y (batch, T_y) target ids → LN(E[y] + P_y) → BART decoder → h E^T   (batch, T_y, V_t)

    Everything after the new encoder keeps `bart`'s names ("embedding", the tied target
    embedding and output, "encoder", "decoder", both embedding norms), so a pre-trained `bart`
    run loads into it and only "source_embedding" and "source_encoder" start from scratch. The
    target vocabulary is BART's.

    The paper trains this variant in two stages: first it freezes BART and updates only the new
    source encoder, BART's positional embeddings and the self-attention input projections of
    BART's first encoder layer; then it trains every parameter for a few iterations.
    `bart_translator_first_stage_variables` returns the variables of the first stage; a model
    built here is trained end to end unless the caller freezes the others
    (`variable.trainable = False`) for a first stage.

    Args:
        source_vocabulary_size: source token ids, padding id 0 included; must equal
            `target_vocabulary_size` when `new_source_encoder_layers=0`.
        target_vocabulary_size: BART's vocabulary size (target side and output).
        num_layers, d_model, num_heads, ff_dim, max_length, dropout: as in `bart` (the new
            source encoder has the same width, heads, feed-forward width and dropout).
        new_source_encoder_layers: blocks of the new source encoder; 0 for the plain fine-tune.
        name: model name.

    Returns:
        A `keras.Model` with inputs `{"source_ids", "target_ids"}` (int32) and float32 logits
        `(batch, T_y, target_vocabulary_size)`, decoded by `keras_attn.models.BartSteps`.

    Example:

    >>> model = bart_translator(40, 30, num_layers=1, d_model=8, num_heads=2, ff_dim=16,
    ...                         max_length=10, new_source_encoder_layers=1)
    >>> tuple(model.output.shape), model.get_layer("source_embedding").vocabulary_size
    ((None, None, 30), 40)

    References:
        Lewis et al., 2019, "BART: Denoising Sequence-to-Sequence Pre-training for Natural
        Language Generation, Translation, and Comprehension", arXiv:1910.13461.
        Liu et al., 2020, "Multilingual Denoising Pre-training for Neural Machine Translation"
        (mBART), arXiv:2001.08210.
    """
    if new_source_encoder_layers < 0:
        raise ValueError(
            "Expected new_source_encoder_layers >= 0. Received: "
            f"new_source_encoder_layers={new_source_encoder_layers}"
        )
    if new_source_encoder_layers == 0:
        if source_vocabulary_size != target_vocabulary_size:
            raise ValueError(
                "A plain BART fine-tune (new_source_encoder_layers=0) has one vocabulary for both "
                f"sides. Received: source_vocabulary_size={source_vocabulary_size}, "
                f"target_vocabulary_size={target_vocabulary_size}"
            )
        return bart(
            target_vocabulary_size,
            num_layers=num_layers,
            d_model=d_model,
            num_heads=num_heads,
            ff_dim=ff_dim,
            max_length=max_length,
            dropout=dropout,
            name=name,
        )
    check_heads_divide_width(d_model, num_heads)
    source_ids = keras.Input((None,), dtype="int32", name="source_ids")
    target_ids = keras.Input((None,), dtype="int32", name="target_ids")
    embedding = learned_position_embedding(
        target_vocabulary_size, d_model, max_length, dropout, EMBEDDING
    )
    source_embedding = learned_position_embedding(
        source_vocabulary_size, d_model, max_length, dropout, SOURCE_EMBEDDING
    )
    source_stack = stack_arguments(
        new_source_encoder_layers, num_heads, ff_dim, dropout, activation="gelu"
    )
    source = TransformerEncoder(**source_stack, name=SOURCE_ENCODER)(source_embedding(source_ids))
    source = keras.layers.LayerNormalization(name=ENCODER_EMBEDDING_NORM)(source)
    stack = stack_arguments(num_layers, num_heads, ff_dim, dropout, activation="gelu")
    return _bart_graph(source_ids, target_ids, source, embedding, stack, name)


_FIRST_STAGE_PREFIXES = (
    f"{SOURCE_EMBEDDING}/",
    f"{SOURCE_ENCODER}/",
    f"{EMBEDDING}/position_embedding/",
    *(
        f"{ENCODER}/block_0/self_attention/{projection}_{kind}"
        for projection in ("query", "key", "value")
        for kind in ("kernel", "bias")
    ),
)


@keras_attn_export("keras_attn.models.bart_translator_first_stage_variables")
def bart_translator_first_stage_variables(model: keras.Model) -> list:
    """The variables the first training stage of a new-source-encoder translator updates.

    Lewis et al. (2019, section 3.3) first train only the new source encoder, BART's positional
    embeddings and the self-attention input projections (query, key and value) of BART's first
    encoder layer, with the rest of BART frozen; a second stage trains every parameter.

    Args:
        model: a model returned by `bart_translator(..., new_source_encoder_layers=K > 0)`.

    Returns:
        The list of those `keras.Variable`s, in `model.weights` order.

    Example:

    >>> model = bart_translator(40, 30, num_layers=1, d_model=8, num_heads=2, ff_dim=16,
    ...                         max_length=10, new_source_encoder_layers=1)
    >>> sorted({v.path.split("/")[0] for v in bart_translator_first_stage_variables(model)})
    ['embedding', 'encoder', 'source_embedding', 'source_encoder']
    """
    if SOURCE_ENCODER not in {layer.name for layer in model.layers}:
        raise ValueError(
            f"Expected a bart_translator with a new source encoder (a layer named "
            f"{SOURCE_ENCODER!r}). Received: model={model.name!r}"
        )
    return [
        variable for variable in model.weights if variable.path.startswith(_FIRST_STAGE_PREFIXES)
    ]
