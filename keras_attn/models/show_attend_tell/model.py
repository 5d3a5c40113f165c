"""Show, Attend and Tell: an image captioner that attends over the regions of a feature grid."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.attention.attention import Attention
from keras_attn.layers.attention.hard_attention import HardAttention
from keras_attn.layers.mask_passthrough import FirstInputMaskPassthrough
from keras_attn.models.show_attend_tell.options import ATTENTIONS
from keras_attn.ops.masking import apply_query_mask
from keras_attn.scores.additive_score import AdditiveScore

# Layer names the decoding view (`keras_attn.models.show_attend_tell.steps`) looks up.
ENCODER = "encoder"
EMBEDDING = "embedding"
DECODER = "decoder"
OUTPUT_PROJECTION = "output_projection"
ATTENTION = "attention"


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"Expected {name} to be a positive integer. Received: {name}={value!r}")
    return value


@keras_attn_export("keras_attn.models.doubly_stochastic_penalty")
def doubly_stochastic_penalty(alphas, mask=None):
    """`sum_i (1 - sum_t alpha_ti)^2` per example: Xu et al.'s doubly stochastic regulariser.

    The attention over the `L` regions sums to one at every step (`sum_i alpha_ti = 1`); the
    penalty pushes the total attention each region receives over the caption towards one, so
    that the decoder looks at every part of the image at some step.

    Args:
        alphas: attention probabilities `(batch, T, L)`.
        mask: bool `(batch, T)`, True at real caption steps; padded steps are left out.

    Returns:
        float32 `(batch,)`.

    Example:

    >>> import numpy as np
    >>> alphas = np.array([[[0.5, 0.5], [1.0, 0.0]]], "float32")  # 2 steps over 2 regions
    >>> np.round(np.asarray(doubly_stochastic_penalty(alphas)), 4).tolist()  # 0.5^2 + 0.5^2
    [0.5]

    References:
        Xu et al., 2015, arXiv:1502.03044, section 4.2.1.
    """
    alphas = ops.cast(alphas, "float32")
    if mask is not None:
        alphas = alphas * ops.cast(ops.expand_dims(mask, -1), "float32")
    return ops.sum(ops.square(1.0 - ops.sum(alphas, axis=1)), axis=-1)


@keras_attn_export("keras_attn.models.ShowAttendTellDecoder")
class ShowAttendTellDecoder(FirstInputMaskPassthrough, keras.layers.Layer):
    """The LSTM caption decoder of Show, Attend and Tell, attending over image regions.

    With annotation vectors `a_i` `(batch, L, D)` (the regions of a feature grid) and the
    embedded previous words `E y_{t-1}` `(batch, T, m)`:

        h_0 = tanh(W_h mean_i a_i + b_h),  c_0 = tanh(W_c mean_i a_i + b_c)     (batch, units)
        alpha_t = softmax_i(v^T tanh(W_1 h_{t-1} + W_2 a_i + b))                (batch, L)
        beta_t  = sigmoid(w_beta h_{t-1} + b_beta)                               (batch, 1)
        z_t     = beta_t * sum_i s_ti a_i                                        (batch, D)
        h_t, c_t = LSTM([E y_{t-1}; z_t], (h_{t-1}, c_{t-1}))
        o_t     = E y_{t-1} + L_h h_t + L_z z_t                                  (batch, m)

    `o_t` is the deep output of eq. (7) before `L_o`: a Dense layer on it gives the logits.
    The region weights `s_t` depend on `attention`:

    - `"soft"` (deterministic): `s_t = alpha_t`, the expected context; trained by
      backpropagation.
    - `"hard"` (stochastic): `s_t` is one-hot, a `keras_attn.layers.HardAttention` choice. In
      training one region is sampled from `alpha_t` (Gumbel-max) and the gradient is the
      straight-through Gumbel-softmax one: the forward value is the one-hot sample, the backward
      pass that of `softmax((log alpha_t + g) / temperature)` with the same noise `g`. This
      replaces the paper's REINFORCE estimator with a moving-average baseline. At inference the
      most probable region, `argmax_i alpha_ti`, is taken: a single region, as in training.
      (Taking the expectation `sum_i alpha_ti a_i` instead is the soft model's context.)

    The doubly stochastic regulariser `penalty * mean_batch sum_i (1 - sum_t alpha_ti)^2` over
    the real caption steps is added with `add_loss` on every call (`model.losses`); it reads
    the probabilities `alpha_t` for both kinds of attention.

    Training runs `step` over the teacher-forced words (`call`); generation calls `step` once per
    word with the same weights, so both compute the same function.

    Args:
        units: LSTM state size `n`.
        attention: `"soft"` or `"hard"`.
        attention_units: hidden size of the additive attention network (default: `D`).
        penalty: `lambda` of the doubly stochastic regulariser, `>= 0` (0 adds no loss).
        temperature: temperature of the relaxed sample of hard attention's gradient, positive.
        seed: integer seed of hard attention's sampler, or None.

    Call arguments:
        inputs: embedded previous words `(batch, T, m)`.
        features: annotation vectors `(batch, L, D)`.
        inputs_mask: bool `(batch, T)`; padded steps get zero outputs and weights. Filled from
            Keras masking when not given.
        return_attention_scores: also return the region weights `s_t`.
        training: hard attention samples when True.

    Returns:
        `outputs` `(batch, T, m)`, or `(outputs, weights)` with weights `(batch, T, L)` when
        `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> decoder = ShowAttendTellDecoder(16)
    >>> words = np.zeros((2, 5, 8), "float32"); regions = np.ones((2, 9, 12), "float32")
    >>> outputs, weights = decoder(words, regions, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(weights.shape), round(float(weights[0, 0, 0]), 4)
    ((2, 5, 8), (2, 5, 9), 0.1111)

    References:
        Xu, Ba, Kiros, Cho, Courville, Salakhutdinov, Zemel and Bengio, 2015, "Show, Attend and
        Tell: Neural Image Caption Generation with Visual Attention", arXiv:1502.03044,
        sections 3.1.2, 4 and 4.2.1; Jang, Gu and Poole, 2017, arXiv:1611.01144.
    """

    def __init__(
        self,
        units: int,
        attention: str = "soft",
        attention_units: int | None = None,
        penalty: float = 1.0,
        temperature: float = 1.0,
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        _positive_int(units, "units")
        if attention not in ATTENTIONS:
            raise ValueError(
                f"Expected attention in {ATTENTIONS}. Received: attention={attention!r}"
            )
        if attention_units is not None:
            _positive_int(attention_units, "attention_units")
        if isinstance(penalty, bool) or not float(penalty) >= 0.0:
            raise ValueError(f"Expected penalty to be >= 0. Received: penalty={penalty!r}")
        if isinstance(temperature, bool) or not float(temperature) > 0.0:
            raise ValueError(
                f"Expected temperature to be positive. Received: temperature={temperature!r}"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"Expected seed to be an integer or None. Received: seed={seed!r}")
        self.units = units
        self.attention = attention
        self.attention_units = attention_units
        self.penalty = float(penalty)
        self.temperature = float(temperature)
        self.seed = seed
        self.supports_masking = True

    def build(self, inputs_shape, features_shape):
        embedding_dim, feature_dim = inputs_shape[-1], features_shape[-1]
        policy = self.dtype_policy
        self.init_h = keras.layers.Dense(self.units, activation="tanh", dtype=policy, name="init_h")
        self.init_c = keras.layers.Dense(self.units, activation="tanh", dtype=policy, name="init_c")
        score = AdditiveScore(units=self.attention_units, dtype=policy, name="score")
        if self.attention == "soft":
            self.region_attention = Attention(score=score, dtype=policy, name="region_attention")
        else:
            self.region_attention = HardAttention(
                score=score,
                temperature=self.temperature,
                seed=self.seed,
                dtype=policy,
                name="region_attention",
            )
        self.gate = keras.layers.Dense(1, activation="sigmoid", dtype=policy, name="gate")
        self.cell = keras.layers.LSTMCell(self.units, dtype=policy, name="cell")
        self.state_projection = keras.layers.Dense(
            embedding_dim, dtype=policy, name="state_projection"
        )
        self.context_projection = keras.layers.Dense(
            embedding_dim, use_bias=False, dtype=policy, name="context_projection"
        )
        self.init_h.build((None, feature_dim))
        self.init_c.build((None, feature_dim))
        self.region_attention.build((None, 1, self.units), features_shape)
        self.gate.build((None, self.units))
        self.cell.build((None, embedding_dim + feature_dim))
        self.state_projection.build((None, self.units))
        self.context_projection.build((None, feature_dim))
        self.built = True

    def initial_state(self, features) -> list:
        """`[h_0, c_0]`, each `(batch, units)`, from the mean annotation vector."""
        mean = ops.mean(features, axis=1)  # (batch, D)
        return [self.init_h(mean), self.init_c(mean)]

    def prepare_features(self, features):
        """The region-only part of the attention score, `W_2 a_i + b` `(batch, L, k)`."""
        return self.region_attention.prepare_keys(features)

    def step(
        self, inputs_t, states, features, prepared_features, training=None, noise=None
    ) -> tuple:
        """One decoder step.

        Args:
            inputs_t: embedded previous word `E y_{t-1}` `(batch, m)`.
            states: `[h_{t-1}, c_{t-1}]`.
            features: `(batch, L, D)`.
            prepared_features: `prepare_features(features)`.
            training: hard attention samples when True.
            noise: hard attention's uniform noise `(batch, 1, L)` for its sample, or None to
                draw it.

        Returns:
            `(output_t (batch, m), weights_t (batch, L), alpha_t (batch, L) float32,
            [h_t, c_t])`: the deep output, the weights `s_t` the context used and the attention
            probabilities.
        """
        query = ops.expand_dims(states[0], 1)  # h_{t-1}: (batch, 1, units)
        scores = self.region_attention.score_fn.score(query, prepared_features)  # (batch, 1, L)
        if self.attention == "hard":  # HardAttention samples from float32 scores.
            scores = ops.cast(scores, "float32")
        # The attention layer's own weights step, with the training flag: the softmax, or hard
        # attention's sample (training) or argmax.
        weights = self.region_attention._calculate_weights(
            scores,
            query=query,
            key=prepared_features,
            query_mask=None,
            value_mask=None,
            attention_mask=None,
            training=training,
            **({} if noise is None else {"uniform": noise}),
        )
        if self.attention == "soft":
            alpha = ops.cast(weights, "float32")
        else:
            alpha = ops.softmax(ops.cast(scores, "float32"), axis=-1)
        # (batch, 1, L) x (batch, L, D) -> (batch, D)
        context = ops.einsum("bqk,bkd->bd", weights, ops.cast(features, weights.dtype))
        context = self.gate(states[0]) * ops.cast(context, self.compute_dtype)  # z_t
        cell_inputs = ops.concatenate([inputs_t, context], axis=-1)
        state_t, new_states = self.cell(cell_inputs, list(states), training=training)
        output = inputs_t + self.state_projection(state_t) + self.context_projection(context)
        return output, weights[:, 0, :], alpha[:, 0, :], list(new_states)

    def call(
        self,
        inputs,
        features,
        inputs_mask=None,
        return_attention_scores=False,
        training=None,
    ):
        inputs = ops.cast(inputs, self.compute_dtype)
        features = ops.cast(features, self.compute_dtype)
        prepared = self.prepare_features(features)
        batch_size, regions = ops.shape(inputs)[0], ops.shape(features)[1]

        sequence = ops.transpose(inputs, (1, 0, 2))  # (batch, T, m) -> (T, batch, m)
        width = inputs.shape[-1]
        # Hard attention's sampling noise for every step, drawn before the loop: a draw inside
        # keras.ops.scan would update the seed generator from inside it (a leak under JAX). The
        # noise rides in the scanned tensor, after each step's inputs (float32, which holds the
        # float16 and bfloat16 inputs exactly): Keras' TensorFlow scan fails on several scanned
        # tensors of unknown length.
        sampling = training and self.attention == "hard"
        if sampling:
            noise = self.region_attention.draw_uniform((ops.shape(inputs)[1], batch_size, regions))
            sequence = ops.concatenate([ops.cast(sequence, "float32"), noise], axis=-1)

        def body(carry, sequences_t):
            inputs_t, noise_t = sequences_t, None
            if sampling:  # (batch, m + L) -> inputs (batch, m), noise (batch, 1, L)
                inputs_t = ops.cast(sequences_t[:, :width], self.compute_dtype)
                noise_t = ops.expand_dims(sequences_t[:, width:], 1)
            output, weights, alpha, states = self.step(
                inputs_t, carry[0], features, prepared, training, noise=noise_t
            )
            new_carry = (states, output, ops.cast(weights, self.compute_dtype), alpha)
            return new_carry, new_carry

        initial = (
            self.initial_state(features),
            ops.zeros((batch_size, inputs.shape[-1]), dtype=self.compute_dtype),
            ops.zeros((batch_size, regions), dtype=self.compute_dtype),
            ops.zeros((batch_size, regions), dtype="float32"),
        )
        # Time-major: (T, batch, m) -> outputs (T, batch, m), weights and alphas (T, batch, L)
        _, (_, outputs, weights, alphas) = ops.scan(body, initial, sequence)
        outputs = apply_query_mask(ops.transpose(outputs, (1, 0, 2)), inputs_mask)
        weights = apply_query_mask(ops.transpose(weights, (1, 0, 2)), inputs_mask)
        if self.penalty:
            alphas = ops.transpose(alphas, (1, 0, 2))  # (batch, T, L)
            penalty = doubly_stochastic_penalty(alphas, inputs_mask)
            self.add_loss(self.penalty * ops.mean(penalty))
        if return_attention_scores:
            return outputs, weights
        return outputs

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            units=self.units,
            attention=self.attention,
            attention_units=self.attention_units,
            penalty=self.penalty,
            temperature=self.temperature,
            seed=self.seed,
        )
        return config


def _image_shape(image_size) -> tuple[int, int]:
    if isinstance(image_size, int) and not isinstance(image_size, bool):
        image_size = (image_size, image_size)
    if (
        not isinstance(image_size, (tuple, list))
        or len(image_size) != 2
        or any(isinstance(s, bool) or not isinstance(s, int) or s <= 0 for s in image_size)
    ):
        raise ValueError(
            "Expected image_size to be a positive integer or a (height, width) pair. "
            f"Received: image_size={image_size!r}"
        )
    return tuple(image_size)


def region_encoder(image_size, encoder_filters, name: str = ENCODER) -> tuple:
    """The convolutional image encoder of `show_attend_tell`: uint8 images `(batch, H, W, 3)` →
    `/ 255` → per entry of `encoder_filters`, a 3x3 ReLU convolution and a 2x2 max-pooling →
    `L = H' W'` region features `(batch, L, D)` (row-major), `D = encoder_filters[-1]`.

    Returns:
        `(encoder, (H', W'))`: a `keras.Sequential` named `name` and the grid of regions.

    Raises:
        ValueError: a bad `image_size`, `encoder_filters` not positive integers, or sides not
            divisible by `2^len(encoder_filters)`.
    """
    height, width = _image_shape(image_size)
    filters = tuple(encoder_filters)
    if not filters or any(isinstance(f, bool) or not isinstance(f, int) or f <= 0 for f in filters):
        raise ValueError(
            "Expected encoder_filters to be a non-empty sequence of positive integers. "
            f"Received: encoder_filters={encoder_filters!r}"
        )
    factor = 2 ** len(filters)
    if height % factor or width % factor:
        raise ValueError(
            f"Expected image sides divisible by 2^len(encoder_filters) = {factor}. "
            f"Received: image_size={image_size!r}, encoder_filters={encoder_filters!r}"
        )
    grid = (height // factor, width // factor)
    blocks = [keras.layers.Rescaling(1.0 / 255.0, name="rescale")]
    for index, channels in enumerate(filters):
        blocks += [
            keras.layers.Conv2D(
                channels, 3, padding="same", activation="relu", name=f"conv_{index}"
            ),
            keras.layers.MaxPooling2D(2, name=f"pool_{index}"),
        ]
    # (batch, H', W', D) -> (batch, L, D), regions in row-major order
    blocks.append(keras.layers.Reshape((grid[0] * grid[1], filters[-1]), name="regions"))
    return keras.Sequential(blocks, name=name), grid


@keras_attn_export("keras_attn.models.show_attend_tell")
def show_attend_tell(
    vocabulary_size: int,
    image_size: int | tuple[int, int],
    attention: str = "soft",
    embedding_dim: int = 64,
    units: int = 128,
    encoder_filters: tuple[int, ...] = (32, 64, 128),
    attention_units: int | None = None,
    dropout: float = 0.1,
    penalty: float = 1.0,
    temperature: float = 1.0,
    seed: int | None = None,
    name: str = "show_attend_tell",
) -> keras.Model:
    """Xu et al.'s image captioner with soft or hard attention, as a Keras functional model.

    images uint8 `(batch, H, W, 3)` → `/ 255` → per entry of `encoder_filters`, a 3x3 ReLU
    convolution and a 2x2 max-pooling → the feature grid `(batch, H', W', D)`,
    `H' = H / 2^k`, `W' = W / 2^k`, `D = encoder_filters[-1]`, read as `L = H' W'` annotation
    vectors `a_i` `(batch, L, D)` (row-major) → `ShowAttendTellDecoder` over the embedded
    teacher-forced caption `(batch, T)` (starting with START; id 0 is padding) → dropout →
    `L_o` → logits.

    Args:
        vocabulary_size: caption vocabulary size, padding id 0 included.
        image_size: `H` (square images) or `(H, W)`; each divisible by `2^len(encoder_filters)`.
        attention: `"soft"` (deterministic) or `"hard"` (stochastic), see
            `ShowAttendTellDecoder`.
        embedding_dim: word embedding size `m` (also the deep output's size).
        units: LSTM state size.
        encoder_filters: channels of the convolutional blocks, one 2x2 pooling each.
        attention_units: hidden size of the attention network (default: `D`).
        dropout: dropout on the deep output before `L_o`.
        penalty: `lambda` of the doubly stochastic regulariser (`model.losses`).
        temperature: temperature of hard attention's relaxed gradient.
        seed: seed of hard attention's sampler.
        name: model name.

    Returns:
        A `keras.Model` with inputs `{"images", "target_ids"}` and outputs `{"logits"
        (batch, T, vocabulary_size) float32, "attention" (batch, T, H', W') float32}`: the
        region weights of every step (soft: `alpha_t`; hard: the chosen region, one-hot). The
        logits carry the Keras mask of the padded caption steps.

    Example:

    >>> model = show_attend_tell(30, 32, embedding_dim=8, units=16, encoder_filters=(4, 8))
    >>> {key: tuple(value.shape) for key, value in model.output.items()}
    {'logits': (None, None, 30), 'attention': (None, None, 8, 8)}

    References:
        Xu, Ba, Kiros, Cho, Courville, Salakhutdinov, Zemel and Bengio, 2015, "Show, Attend and
        Tell: Neural Image Caption Generation with Visual Attention", arXiv:1502.03044.
    """
    _positive_int(vocabulary_size, "vocabulary_size")
    _positive_int(embedding_dim, "embedding_dim")
    encoder, grid = region_encoder(image_size, encoder_filters)
    if not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"Expected dropout in [0, 1). Received: dropout={dropout!r}")

    images = keras.Input((*_image_shape(image_size), 3), dtype="uint8", name="images")
    target_ids = keras.Input((None,), dtype="int32", name="target_ids")
    features = encoder(images)
    embedded = keras.layers.Embedding(
        vocabulary_size, embedding_dim, mask_zero=True, name=EMBEDDING
    )(target_ids)
    decoder = ShowAttendTellDecoder(
        units,
        attention=attention,
        attention_units=attention_units,
        penalty=penalty,
        temperature=temperature,
        seed=seed,
        name=DECODER,
    )
    outputs, weights = decoder(embedded, features, return_attention_scores=True)
    outputs = keras.layers.Dropout(dropout, name="output_dropout")(outputs)
    logits = keras.layers.Dense(vocabulary_size, dtype="float32", name=OUTPUT_PROJECTION)(outputs)
    # (batch, T, L) -> (batch, T, H', W')
    attention_maps = keras.layers.Reshape((-1, *grid), dtype="float32", name=ATTENTION)(weights)
    return keras.Model(
        {"images": images, "target_ids": target_ids},
        {"logits": logits, "attention": attention_maps},
        name=name,
    )
