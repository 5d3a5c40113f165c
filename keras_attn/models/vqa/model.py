"""A visual question answerer: image regions and question words attend to each other (parallel
co-attention), and their attended summaries give the answer."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn import distributions
from keras_attn.api_export import keras_attn_export
from keras_attn.layers.attention.co_attention import CoAttention
from keras_attn.models.show_attend_tell.model import _image_shape, _positive_int, region_encoder

# Layer names the task and the export look up.
ENCODER = "encoder"
EMBEDDING = "embedding"
QUESTION_ENCODER = "question_encoder"
REGION_FEATURES = "region_features"
CO_ATTENTION = "co_attention"
JOINT = "joint"
ANSWER = "answer"


@keras_attn_export("keras_attn.models.ParallelCoAttention")
class ParallelCoAttention(keras.layers.Layer):
    """Parallel co-attention: image regions and question words attend to each other at once.

    With region features `V` `(batch, L, d_v)` and word features `Q` `(batch, T, d_q)`, a
    `keras_attn.layers.CoAttention` affinity `C = V^T W_b Q` `(batch, L, T)`, normalised over
    the words (`A_v`) and over the regions (`A_q`), carries each side's features to the other:

        H^v = tanh(W_v V + W_q (A_v Q))          (batch, L, k)
        H^q = tanh(W_q Q + W_v (A_q^T V))        (batch, T, k)
        a^v = softmax_L(H^v w_hv)                (batch, L)
        a^q = softmax_T(H^q w_hq)                (batch, T)   over the real words only
        v_hat = sum_i a^v_i v_i                  (batch, d_v)
        q_hat = sum_t a^q_t q_t                  (batch, d_q)

    Lu et al.'s eq. (3)-(4) with the affinity normalised by a softmax before it transfers
    features (`tanh(Q^T W_b V)` in the paper): `W_v` and `W_q` are shared by both maps, as
    there.

    Args:
        units: `k`, the width of the attention maps `H^v` and `H^q`.
        score: the affinity, a `keras_attn.scores` name or instance (default `"general"`, the
            bilinear `v^T W_b q`).

    Call arguments:
        regions: `V` `(batch, L, d_v)`.
        words: `Q` `(batch, T, d_q)`.
        words_mask: bool `(batch, T)`, True at real words; filled from Keras masking. A
            question without words gives `q_hat = 0` and region weights from the image alone.
        return_attention_scores: also return the weights.

    Returns:
        `(v_hat, q_hat)`, or `((v_hat, q_hat), (a^v, a^q))` with `a^v` `(batch, L)` and `a^q`
        `(batch, T)` float32 when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = ParallelCoAttention(8)
    >>> regions = np.random.rand(2, 16, 6).astype("float32")
    >>> words = np.random.rand(2, 5, 4).astype("float32")
    >>> (v_hat, q_hat), (a_v, a_q) = layer(regions, words, return_attention_scores=True)
    >>> tuple(v_hat.shape), tuple(q_hat.shape), tuple(a_v.shape), tuple(a_q.shape)
    ((2, 6), (2, 4), (2, 16), (2, 5))

    References:
        Lu, Yang, Batra and Parikh, 2016, "Hierarchical Question-Image Co-Attention for Visual
        Question Answering", arXiv:1606.00061, section 3.3 (parallel co-attention).
    """

    def __init__(self, units: int, score="general", **kwargs):
        super().__init__(**kwargs)
        _positive_int(units, "units")
        self.units = units
        self.score = score
        self.supports_masking = True

    def build(self, regions_shape, words_shape):
        policy = self.dtype_policy
        self.co_attention = CoAttention(score=self.score, dtype=policy, name="co_attention")
        self.region_projection = keras.layers.Dense(
            self.units, use_bias=False, dtype=policy, name="region_projection"
        )  # W_v
        self.word_projection = keras.layers.Dense(
            self.units, use_bias=False, dtype=policy, name="word_projection"
        )  # W_q
        self.region_score = keras.layers.Dense(
            1, use_bias=False, dtype=policy, name="region_score"
        )  # w_hv
        self.word_score = keras.layers.Dense(1, use_bias=False, dtype=policy, name="word_score")
        self.softmax = distributions.get("softmax", dtype=policy)
        self.co_attention.build(regions_shape, words_shape)
        self.region_projection.build(regions_shape)
        self.word_projection.build(words_shape)
        self.region_score.build((None, None, self.units))
        self.word_score.build((None, None, self.units))
        self.built = True

    def call(self, regions, words, words_mask=None, return_attention_scores=False):
        regions = ops.cast(regions, self.compute_dtype)
        words = ops.cast(words, self.compute_dtype)
        # (batch, L, d_q) words seen by each region, (batch, T, d_v) regions seen by each word
        words_seen, regions_seen = self.co_attention(regions, words, b_mask=words_mask)
        region_map = ops.tanh(
            self.region_projection(regions) + self.word_projection(words_seen)
        )  # H^v (batch, L, k)
        word_map = ops.tanh(
            self.word_projection(words) + self.region_projection(regions_seen)
        )  # H^q (batch, T, k)
        # (batch, L, k) -> (batch, 1, L): one row of scores over the regions
        region_scores = ops.transpose(self.region_score(region_map), (0, 2, 1))
        word_scores = ops.transpose(self.word_score(word_map), (0, 2, 1))  # (batch, 1, T)
        word_keep = None if words_mask is None else ops.expand_dims(words_mask, 1)
        region_weights = ops.cast(self.softmax(region_scores)[:, 0], "float32")  # (batch, L)
        word_weights = ops.cast(
            self.softmax(word_scores, attention_mask=word_keep)[:, 0], "float32"
        )  # (batch, T)
        # (batch, L) x (batch, L, d_v) -> (batch, d_v)
        v_hat = ops.einsum("bl,bld->bd", ops.cast(region_weights, regions.dtype), regions)
        q_hat = ops.einsum("bt,btd->bd", ops.cast(word_weights, words.dtype), words)
        if return_attention_scores:
            return (v_hat, q_hat), (region_weights, word_weights)
        return v_hat, q_hat

    def compute_mask(self, regions, previous_mask=None):
        return None

    def get_config(self) -> dict:
        config = super().get_config()
        score = self.score
        if not isinstance(score, str):
            score = keras.saving.serialize_keras_object(score)
        config.update(units=self.units, score=score)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("score"), dict):
            config["score"] = keras.saving.deserialize_keras_object(config["score"])
        return cls(**config)


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
