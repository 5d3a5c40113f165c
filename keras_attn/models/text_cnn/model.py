"""Functional builder of Kim's CNN sentence classifier (rand, static, non-static, multichannel)."""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export

VARIANTS = ("rand", "static", "non-static", "multichannel")
EMBEDDING = "embedding"
STATIC_EMBEDDING = "static_embedding"
FEATURES = "features"


def _windows_with_a_real_token(mask, size: int):
    """Whether each window of `size` over the mask padded by `size - 1` on both sides has a
    real position: `(batch, T)` -> `(batch, T + size - 1)`."""
    padded = ops.pad(ops.cast(mask, "float32"), ((0, 0), (size - 1, size - 1)))
    # (batch, T + 2(h - 1), 1) -> (batch, T + h - 1, 1)
    windows = ops.max_pool(ops.expand_dims(padded, -1), size, strides=1, padding="valid")
    return ops.squeeze(windows, -1) > 0.5


def _masked_max_over_time(features, mask):
    """max_t over the windows of `features` `(batch, T', n)` where `mask` `(batch, T')` is
    True; 0 for a row with none."""
    filled = ops.where(ops.expand_dims(mask, -1), features, ops.full_like(features, float("-inf")))
    pooled = ops.max(filled, axis=1)  # (batch, n)
    return ops.where(ops.any(mask, axis=1, keepdims=True), pooled, ops.zeros_like(pooled))


@keras_attn_export("keras_attn.models.text_cnn")
def text_cnn(
    vocabulary_size: int,
    num_classes: int,
    variant: str = "rand",
    embedding_dim: int = 300,
    embeddings: np.ndarray | None = None,
    filter_sizes: tuple[int, ...] = (3, 4, 5),
    num_filters: int = 100,
    activation: str = "relu",
    dropout: float = 0.5,
    max_norm: float | None = 3.0,
    name: str = "text_cnn",
) -> keras.Model:
    """Kim's CNN for sentence classification: filters of several widths, max-over-time pooling.

        x_t = E[w_t]  (0 at padding and for t < 0, t >= T)  (batch, T, d)   one channel
        c^h_i = f(W_h · x_{i-h+1:i} + b_h)                  (batch, T + h - 1, n)   per width h
        ĉ^h = max_{i: window i holds a real token} c^h_i    (batch, n)
        logits = Dropout([ĉ^3; ĉ^4; ĉ^5]) W + b              (batch, num_classes) float32

    As in Kim's code, the sentence is padded with `h - 1` zero vectors on both sides, so every
    token is in `h` windows (the first and last words as many as the others). Padding ids embed
    to zero vectors and windows made only of padding are left out of the max, so the output does
    not depend on how many padding ids follow a sentence, nor on their embedding. Id 0 is
    padding; a sentence with no real token gives zero features. Variants (section 3.1 of the
    paper):

    - `"rand"`: one embedding, randomly initialised (U[-0.25, 0.25]) and trained.
    - `"static"`: one embedding initialised from `embeddings` and kept frozen.
    - `"non-static"`: one embedding initialised from `embeddings` and fine-tuned.
    - `"multichannel"`: two channels both initialised from `embeddings`, one frozen
      (`"static_embedding"`) and one fine-tuned (`"embedding"`); each filter is applied to both
      channels and the results added (a convolution over the concatenated channels, `2d` wide).

    `max_norm` rescales each class's weight vector `W[:, k]` to L2 norm `s` whenever it exceeds
    it after an optimizer step (the paper's `s = 3`).

    Args:
        vocabulary_size: number of token ids, padding id 0 included.
        num_classes: number of classes.
        variant: one of `"rand"`, `"static"`, `"non-static"`, `"multichannel"`.
        embedding_dim: `d` for `"rand"`; the other variants take it from `embeddings`.
        embeddings: pre-trained vectors `(vocabulary_size, d)`, required by every variant but
            `"rand"` (row 0, padding, is never read).
        filter_sizes: window widths `h` (the paper's 3, 4, 5).
        num_filters: feature maps `n` per width (the paper's 100).
        activation: the non-linearity `f` (the paper's ReLU).
        dropout: dropout rate on the pooled features (the paper's 0.5).
        max_norm: the L2 bound `s` on the class weight vectors; None for none.
        name: model name.

    Returns:
        A `keras.Model` from `token_ids` (int32 `(batch, T)`) to float32 logits
        `(batch, num_classes)`; its layer `"features"` gives the pooled features.

    Example:

    >>> model = text_cnn(50, 2, embedding_dim=8, num_filters=4)
    >>> tuple(model.output.shape), tuple(model.get_layer("features").output.shape)
    ((None, 2), (None, 12))

    References:
        Kim, 2014, "Convolutional Neural Networks for Sentence Classification", EMNLP,
        arXiv:1408.5882.
    """
    if variant not in VARIANTS:
        raise ValueError(f"Expected variant in {list(VARIANTS)}. Received: variant={variant!r}")
    if num_classes <= 0:
        raise ValueError(f"Expected a positive num_classes. Received: num_classes={num_classes}")
    if not filter_sizes or any(size <= 0 for size in filter_sizes):
        raise ValueError(
            f"Expected positive filter sizes. Received: filter_sizes={tuple(filter_sizes)}"
        )
    if variant == "rand":
        if embeddings is not None:
            raise ValueError(
                "Expected no embeddings for variant='rand' (it learns its own); pass "
                "variant='static', 'non-static' or 'multichannel' to use them"
            )
        initializer = keras.initializers.RandomUniform(-0.25, 0.25)
    else:
        if embeddings is None:
            raise ValueError(f"Expected embeddings for variant={variant!r}. Received: None")
        embeddings = np.asarray(embeddings, "float32")
        if embeddings.ndim != 2 or embeddings.shape[0] != vocabulary_size:
            raise ValueError(
                f"Expected embeddings of shape ({vocabulary_size}, d). "
                f"Received: shape={embeddings.shape}"
            )
        embedding_dim = embeddings.shape[1]
        initializer = "zeros"  # overwritten by `embeddings` below

    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    mask = ops.not_equal(token_ids, 0)  # (batch, T)
    trained = keras.layers.Embedding(
        vocabulary_size,
        embedding_dim,
        embeddings_initializer=initializer,
        trainable=variant != "static",
        name=EMBEDDING,
    )
    channels = [trained]
    if variant == "multichannel":
        channels.append(
            keras.layers.Embedding(
                vocabulary_size, embedding_dim, trainable=False, name=STATIC_EMBEDDING
            )
        )
    # (batch, T, d) per channel, zero at padding -> (batch, T, channels * d)
    embedded = [layer(token_ids) for layer in channels]
    x = embedded[0] if len(embedded) == 1 else keras.layers.Concatenate(name="channels")(embedded)
    x = x * ops.cast(ops.expand_dims(mask, -1), x.dtype)
    pooled = []
    for size in filter_sizes:
        # h - 1 zero vectors on both sides: every token is in h windows.
        padded = ops.pad(x, ((0, 0), (size - 1, size - 1), (0, 0)))  # (batch, T + 2(h-1), c*d)
        conv = keras.layers.Conv1D(num_filters, size, activation=activation, name=f"conv_{size}")
        maps = conv(padded)  # (batch, T + h - 1, n): window j covers tokens j - h + 1 .. j
        pooled.append(_masked_max_over_time(maps, _windows_with_a_real_token(mask, size)))
    # (batch, widths * n)
    if len(pooled) == 1:
        features = keras.layers.Identity(name=FEATURES)(pooled[0])
    else:
        features = keras.layers.Concatenate(name=FEATURES)(pooled)
    features = keras.layers.Dropout(dropout, name="dropout")(features)
    constraint = None if max_norm is None else keras.constraints.MaxNorm(max_norm, axis=0)
    logits = keras.layers.Dense(
        num_classes, kernel_constraint=constraint, dtype="float32", name="classifier"
    )(features)
    model = keras.Model(token_ids, logits, name=name)
    if embeddings is not None:
        for layer in channels:
            layer.set_weights([embeddings])
    return model
