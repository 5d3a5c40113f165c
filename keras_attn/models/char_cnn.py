"""Functional builder of the character-level ConvNet of Zhang, Zhao & LeCun (2015)."""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export

CHAR_EMBEDDING = "char_embedding"
FLATTEN = "flatten"

# Table 1 of the paper: (kernel size, pooling size or None) of the six convolutions.
CONVOLUTIONS = ((7, 3), (7, 3), (3, None), (3, None), (3, None), (3, 3))
# Tables 1 and 2: convolution features, fully-connected units, std of the Gaussian initializer.
SIZES = {"small": (256, 1024, 0.05), "large": (1024, 2048, 0.02)}


def frames_after_convolutions(input_length: int) -> int:
    """The number of frames the six convolutions and three poolings leave of `input_length`.

    For the paper's `l0 = 1014` this is `(l0 - 96) / 27 = 34`.

    >>> frames_after_convolutions(1014)
    34
    """
    frames = input_length
    for kernel, pool in CONVOLUTIONS:
        frames = frames - kernel + 1
        if pool is not None:
            frames //= pool
    return frames


@keras_attn_export("keras_attn.models.char_cnn")
def char_cnn(
    num_classes: int,
    alphabet_size: int = 69,
    input_length: int = 1014,
    size: str = "small",
    embedding_dim: int | None = None,
    dropout: float = 0.5,
    name: str = "char_cnn",
) -> keras.Model:
    """Character-level ConvNet: 6 convolutions (3 with max-pooling) and 3 fully-connected layers.

        x = onehot(c) or E[c]  (0 for id 0)                  (batch, l0, alphabet or e)
        conv 7, pool 3 → conv 7, pool 3 → conv 3 → conv 3 → conv 3 → conv 3, pool 3
                                                             (batch, (l0 - 96) / 27, F)
        → Flatten → Dense(D) → Dropout → Dense(D) → Dropout → Dense(num_classes)
                                                             (batch, num_classes) float32

    Convolutions are unpadded with stride 1 and ReLU; poolings are non-overlapping max-poolings.
    `"small"` has `F = 256` features and `D = 1024` units, `"large"` `F = 1024` and `D = 2048`;
    weights start from a Gaussian with standard deviation 0.05 (small) or 0.02 (large), as in
    the paper. Id 0 (padding, and any character outside the alphabet) is the all-zero vector in
    both input modes, so the output does not depend on the embedding of id 0.

    Args:
        num_classes: number of classes.
        alphabet_size: characters `m`; ids run over `1..m` (`encode_characters`). The default
            is `len(ZHANG_ALPHABET)`, the paper's alphabet (which the paper counts as 70).
        input_length: the fixed input length `l0` (the paper's 1014).
        size: `"small"` or `"large"`.
        embedding_dim: None for the paper's one-hot quantization (a frozen identity embedding);
            an integer for a trained character embedding of that size.
        dropout: dropout rate between the fully-connected layers (the paper's 0.5).
        name: model name.

    Returns:
        A `keras.Model` from `char_ids` (int32 `(batch, input_length)`) to float32 logits
        `(batch, num_classes)`.

    Example:

    >>> model = char_cnn(4, alphabet_size=10, input_length=200)
    >>> tuple(model.output.shape), tuple(model.get_layer("flatten").output.shape)
    ((None, 4), (None, 768))

    References:
        Zhang, Zhao and LeCun, 2015, "Character-level Convolutional Networks for Text
        Classification", NeurIPS, arXiv:1509.01626, section 2.3.
    """
    if size not in SIZES:
        raise ValueError(f"Expected size in {list(SIZES)}. Received: size={size!r}")
    if num_classes <= 0:
        raise ValueError(f"Expected a positive num_classes. Received: num_classes={num_classes}")
    if alphabet_size <= 0:
        raise ValueError(
            f"Expected a positive alphabet_size. Received: alphabet_size={alphabet_size}"
        )
    if frames_after_convolutions(input_length) < 1:
        raise ValueError(
            "Expected input_length of at least 123 (the convolutions and poolings leave no "
            f"frame otherwise). Received: input_length={input_length}"
        )
    features, units, stddev = SIZES[size]

    def gaussian():
        return keras.initializers.RandomNormal(0.0, stddev)

    char_ids = keras.Input((input_length,), dtype="int32", name="char_ids")
    one_hot = embedding_dim is None
    embedding = keras.layers.Embedding(
        alphabet_size + 1,
        alphabet_size if one_hot else embedding_dim,
        embeddings_initializer="zeros" if one_hot else gaussian(),
        trainable=not one_hot,
        name=CHAR_EMBEDDING,
    )
    x = embedding(char_ids)  # (batch, l0, m or e)
    x = x * ops.cast(ops.expand_dims(ops.not_equal(char_ids, 0), -1), x.dtype)
    for index, (kernel, pool) in enumerate(CONVOLUTIONS, start=1):
        x = keras.layers.Conv1D(
            features, kernel, activation="relu", kernel_initializer=gaussian(), name=f"conv_{index}"
        )(x)
        if pool is not None:
            x = keras.layers.MaxPooling1D(pool, name=f"pool_{index}")(x)
    x = keras.layers.Flatten(name=FLATTEN)(x)  # (batch, frames * F)
    for index in (7, 8):
        x = keras.layers.Dense(
            units, activation="relu", kernel_initializer=gaussian(), name=f"dense_{index}"
        )(x)
        x = keras.layers.Dropout(dropout, name=f"dropout_{index}")(x)
    logits = keras.layers.Dense(
        num_classes, kernel_initializer=gaussian(), dtype="float32", name="classifier"
    )(x)
    model = keras.Model(char_ids, logits, name=name)
    if one_hot:
        # Row 0 stays zero; row i is the one-hot vector of alphabet[i - 1].
        identity = np.concatenate([np.zeros((1, alphabet_size)), np.eye(alphabet_size)])
        embedding.set_weights([identity.astype("float32")])
    return model
