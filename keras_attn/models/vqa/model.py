"""A visual question answerer: image regions and question words attend to each other (parallel
co-attention), and their attended summaries give the answer."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.attention.parallel_co_attention import ParallelCoAttention
from keras_attn.models.show_attend_tell.model import _image_shape, _positive_int, region_encoder

# Layer names the task and the export look up.
ENCODER = "encoder"
EMBEDDING = "embedding"
QUESTION_ENCODER = "question_encoder"
REGION_FEATURES = "region_features"
CO_ATTENTION = "co_attention"
JOINT = "joint"
ANSWER = "answer"


@keras_attn_export("keras_attn.models.vqa_coattention")
def vqa_coattention(
    vocabulary_size: int,
    num_answers: int,
    image_size,
    embedding_dim: int = 32,
    units: int = 64,
    attention_units: int = 32,
    encoder_filters: tuple[int, ...] = (16, 32, 32),
    dropout: float = 0.1,
    name: str = "vqa_coattention",
) -> keras.Model:
    """A visual question answerer with parallel co-attention, as a Keras functional model.

    images uint8 `(batch, H, W, 3)` → the convolutional encoder of `show_attend_tell` → region
    features `(batch, L, D)`, `L = H' W'` → `tanh` Dense → `V` `(batch, L, units)`; question
    ids `(batch, T)` (0 is padding) → embedding → a width-3 `tanh` convolution over the words
    (Lu et al.'s phrase-level features, one n-gram size) → `Q` `(batch, T, units)`;
    `ParallelCoAttention(V, Q)` over the real words → `v_hat`, `q_hat` →

        h = tanh(W_w (v_hat + q_hat))      (batch, units)
        p = softmax(W_h h)                 (batch, num_answers)

    as Lu et al.'s answer layer on one level (eq. 7-8), with dropout on `h`.

    Args:
        vocabulary_size: question vocabulary size, padding id 0 included.
        num_answers: the answers the softmax is over.
        image_size: `H` (square images) or `(H, W)`; each divisible by `2^len(encoder_filters)`.
        embedding_dim: word embedding size.
        units: width of `V`, `Q` and `h`.
        attention_units: width `k` of the co-attention maps.
        encoder_filters: channels of the convolutional blocks, one 2x2 pooling each.
        dropout: dropout on `h`.
        name: model name.

    Returns:
        A `keras.Model` with inputs `{"images", "question_ids"}` and outputs `{"logits"
        (batch, num_answers) float32, "attention" (batch, H', W') float32 (the region weights
        `a^v`), "question_attention" (batch, T) float32 (the word weights `a^q`)}`.

    Example:

    >>> model = vqa_coattention(30, 16, 32, embedding_dim=8, units=16, attention_units=8)
    >>> {key: tuple(value.shape) for key, value in model.output.items()}
    {'logits': (None, 16), 'attention': (None, 4, 4), 'question_attention': (None, None)}

    References:
        Lu, Yang, Batra and Parikh, 2016, "Hierarchical Question-Image Co-Attention for Visual
        Question Answering", arXiv:1606.00061.
    """
    _positive_int(vocabulary_size, "vocabulary_size")
    _positive_int(num_answers, "num_answers")
    _positive_int(embedding_dim, "embedding_dim")
    _positive_int(units, "units")
    if not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"Expected dropout in [0, 1). Received: dropout={dropout!r}")
    encoder, grid = region_encoder(image_size, encoder_filters, name=ENCODER)

    images = keras.Input((*_image_shape(image_size), 3), dtype="uint8", name="images")
    question_ids = keras.Input((None,), dtype="int32", name="question_ids")
    regions = keras.layers.Dense(units, activation="tanh", name=REGION_FEATURES)(encoder(images))
    embedded = keras.layers.Embedding(
        vocabulary_size, embedding_dim, mask_zero=True, name=EMBEDDING
    )(question_ids)
    mask = ops.not_equal(question_ids, 0)  # (batch, T), True at real words
    # Padding embedded as zeros: a word next to the padding sees what it sees at a question's
    # end, so the features do not depend on how much padding follows.
    embedded = embedded * ops.expand_dims(ops.cast(mask, embedded.dtype), -1)
    words = keras.layers.Conv1D(units, 3, padding="same", activation="tanh", name=QUESTION_ENCODER)(
        embedded
    )
    (v_hat, q_hat), (region_weights, word_weights) = ParallelCoAttention(
        attention_units, name=CO_ATTENTION
    )(regions, words, words_mask=mask, return_attention_scores=True)
    joint = keras.layers.Dense(units, activation="tanh", name=JOINT)(
        keras.layers.Add(name="summaries")([v_hat, q_hat])
    )
    joint = keras.layers.Dropout(dropout, name="joint_dropout")(joint)
    logits = keras.layers.Dense(num_answers, dtype="float32", name=ANSWER)(joint)
    # (batch, L) -> (batch, H', W'), regions in row-major order
    attention = keras.layers.Reshape(grid, dtype="float32", name="attention")(region_weights)
    word_attention = keras.layers.Identity(dtype="float32", name="question_attention")(word_weights)
    return keras.Model(
        {"images": images, "question_ids": question_ids},
        {"logits": logits, "attention": attention, "question_attention": word_attention},
        name=name,
    )
