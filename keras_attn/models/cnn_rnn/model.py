"""The model of the `cnn-rnn` family: a convolutional encoder under Bahdanau's attention RNN
decoder.

The encoder is the one of Gehring et al. (2017): embeddings plus positions, then a stack of
convolutions with gated linear units and scaled residual connections; an RNN decoder attends to
its outputs (Bahdanau et al., 2015), as in the convolutional encoders of Kalchbrenner and
Blunsom (2013) and Gehring et al. (2017, "A Convolutional Encoder Model"). The model keeps the
layer names of `rnn_attention_translator`, so `keras_attn.models.RNNTranslatorSteps` decodes it.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_attn.layers.embedding.sinusoidal_position_encoding import SinusoidalPositionEncoding
from keras_attn.layers.recurrent.bahdanau_decoder import BahdanauDecoder
from keras_attn.models.cnn_rnn.options import ACTIVATIONS, CELLS, POSITIONS
from keras_attn.models.rnn.attention import (
    BRIDGE,
    DECODER,
    ENCODER,
    SOURCE_EMBEDDING,
    embed_target,
    project_outputs,
    stack_options,
    translator_inputs,
)
from keras_attn.models.rnn.steps import SOURCE_DROPOUT

# The residual scale of Gehring et al. (section 3.4): it keeps the variance of a sum of two
# branches that of one.
RESIDUAL_SCALE = math.sqrt(0.5)


@keras.saving.register_keras_serializable(package="keras_attn")
class ConvolutionalEncoder(keras.layers.Layer):
    """A stack of masked convolutions over embedded tokens (Gehring et al., 2017, section 3).

        e = x + p                                  (batch, T, d)     p: the positions' vectors
        z_0 = (e W_in + b_in) ⊙ m                  (batch, T, units) m: 1 real, 0 padding
        h_l = GLU(conv_l(z_{l-1} ⊙ m))             (batch, T, units) GLU([a; b]) = a ⊙ σ(b)
        z_l = (h_l + z_{l-1}) · sqrt(0.5)
        memory = z_L ⊙ m
        s = Σ_t memory_t / Σ_t m_t                 (batch, units)    the masked mean

    Each convolution has width `kernel_width`, stride 1 and "same" padding (`(k - 1) // 2`
    zeros before the first position, the rest after the last), and reads its input with the
    padded positions zeroed, so no padding value reaches a real position: the memory at real
    positions and `s` are the same with or without padding appended. With
    `activation="relu"`, `h_l = relu(conv_l(z_{l-1} ⊙ m))` and each convolution has `units`
    filters instead of `2 * units`. Dropout (`dropout`) is applied to each convolution's input.

    `positions="learned"` adds a trained vector per position (Gehring et al.); positions from
    `max_positions - 1` on share the last one. `"sinusoidal"` adds the fixed encoding of
    Vaswani et al. (2017, section 3.5), which has no limit.

    Args:
        units: the width of the convolutions and of the memory.
        kernel_width: the width `k` of each convolution.
        num_layers: the number of convolution blocks `L`.
        activation: `"glu"` (gated linear units, Dauphin et al., 2017) or `"relu"`.
        positions: `"learned"` or `"sinusoidal"`.
        max_positions: the positions a learned table holds.
        dropout: dropout rate on the input of each convolution.
        num_states: how many times `s` is returned (one per decoder state it initialises).

    Call arguments:
        inputs: embedded tokens `(batch, T, d)`.
        mask: bool `(batch, T)`, True at real positions; filled from Keras masking (e.g.
            `Embedding(mask_zero=True)`). None: every position is real.
        training: enables dropout.

    Returns:
        A flat tuple `(memory, s, ..., s)`: `memory` `(batch, T, units)` and `num_states`
        copies of `s` `(batch, units)`, as `keras_attn.layers.BidirectionalEncoder` returns its
        sequence and final states.

    Example:

    >>> import numpy as np
    >>> encoder = ConvolutionalEncoder(8, kernel_width=3, num_layers=2, num_states=2)
    >>> memory, *states = encoder(np.ones((2, 5, 4), "float32"))
    >>> tuple(memory.shape), [tuple(s.shape) for s in states]
    ((2, 5, 8), [(2, 8), (2, 8)])

    References:
        Gehring et al., 2017, "Convolutional Sequence to Sequence Learning", arXiv:1705.03122.
        Gehring et al., 2017, "A Convolutional Encoder Model for Neural Machine Translation",
        arXiv:1611.02344. Dauphin et al., 2017, "Language Modeling with Gated Convolutional
        Networks", arXiv:1612.08083.
    """

    def __init__(
        self,
        units: int,
        kernel_width: int = 3,
        num_layers: int = 4,
        activation: str = "glu",
        positions: str = "learned",
        max_positions: int = 512,
        dropout: float = 0.0,
        num_states: int = 1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (
            ("units", units),
            ("kernel_width", kernel_width),
            ("num_layers", num_layers),
            ("max_positions", max_positions),
            ("num_states", num_states),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Expected a positive int {name}. Received: {name}={value!r}")
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"Expected activation in {ACTIVATIONS}. Received: activation={activation!r}"
            )
        if positions not in POSITIONS:
            raise ValueError(
                f"Expected positions in {POSITIONS}. Received: positions={positions!r}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"Expected dropout in [0, 1). Received: dropout={dropout!r}")
        self.units = units
        self.kernel_width = kernel_width
        self.num_layers = num_layers
        self.activation = activation
        self.positions = positions
        self.max_positions = max_positions
        self.dropout = dropout
        self.num_states = num_states
        self.supports_masking = True

    def build(self, inputs_shape):
        dim = inputs_shape[-1]
        if self.positions == "learned":
            self.position_embeddings = self.add_weight(
                name="position_embeddings",
                shape=(self.max_positions, dim),
                initializer=keras.initializers.RandomNormal(stddev=0.1),
            )
        else:
            self.position_encoding = SinusoidalPositionEncoding(
                name="position_encoding", dtype=self.dtype_policy
            )
        self.input_projection = keras.layers.Dense(
            self.units, name="input_projection", dtype=self.dtype_policy
        )
        self.input_projection.build((None, None, dim))
        filters = 2 * self.units if self.activation == "glu" else self.units
        self.convolutions = []
        for index in range(1, self.num_layers + 1):
            convolution = keras.layers.Conv1D(
                filters,
                self.kernel_width,
                padding="same",
                name=f"convolution_{index}",
                dtype=self.dtype_policy,
            )
            convolution.build((None, None, self.units))
            self.convolutions.append(convolution)
        self.dropout_layer = keras.layers.Dropout(
            self.dropout, name="dropout", dtype=self.dtype_policy
        )
        self.built = True

    def _positions(self, inputs):
        """The position vectors `(batch, T, d)` added to `inputs`."""
        if self.positions == "sinusoidal":
            return self.position_encoding(inputs)
        steps = ops.minimum(ops.arange(ops.shape(inputs)[1]), self.max_positions - 1)
        table = ops.cast(self.position_embeddings, self.compute_dtype)
        return ops.broadcast_to(ops.take(table, steps, axis=0), ops.shape(inputs))

    def call(self, inputs, mask=None, training=None):
        inputs = ops.cast(inputs, self.compute_dtype)
        if mask is None:
            real = ops.ones(ops.shape(inputs)[:2], dtype=self.compute_dtype)
        else:
            real = ops.cast(mask, self.compute_dtype)
        keep = ops.expand_dims(real, -1)  # (batch, T, 1)
        z = self.input_projection(inputs + self._positions(inputs)) * keep  # (batch, T, units)
        for convolution in self.convolutions:
            h = convolution(self.dropout_layer(z * keep, training=training))
            if self.activation == "glu":
                a, b = ops.split(h, 2, axis=-1)  # (batch, T, units) each
                h = a * ops.sigmoid(b)
            else:
                h = ops.relu(h)
            z = (h + z) * ops.cast(RESIDUAL_SCALE, self.compute_dtype)
        memory = z * keep
        # The masked mean in float32; a sequence of padding only gets zeros.
        total = ops.sum(ops.cast(memory, "float32"), axis=1)  # (batch, units)
        count = ops.maximum(ops.sum(ops.cast(keep, "float32"), axis=1), 1.0)  # (batch, 1)
        mean = ops.cast(total / count, self.compute_dtype)
        return (memory,) + (mean,) * self.num_states

    def compute_mask(self, inputs, mask=None):
        return (mask,) + (None,) * self.num_states

    def compute_output_shape(self, inputs_shape):
        batch, steps = inputs_shape[0], inputs_shape[1]
        return ((batch, steps, self.units),) + ((batch, self.units),) * self.num_states

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units,
            kernel_width=self.kernel_width,
            num_layers=self.num_layers,
            activation=self.activation,
            positions=self.positions,
            max_positions=self.max_positions,
            dropout=self.dropout,
            num_states=self.num_states,
        )
        return config


def cnn_translator(
    source_vocabulary_size: int,
    target_vocabulary_size: int,
    embedding_dim: int = 128,
    units: int = 256,
    kernel_width: int = 3,
    num_layers: int = 4,
    activation: str = "glu",
    positions: str = "learned",
    max_positions: int = 512,
    cell: str = "lstm",
    decoder_layers: int = 1,
    dropout: float = 0.1,
    name: str = "cnn_translator",
) -> keras.Model:
    """A convolutional encoder and an attention RNN decoder as a Keras functional model.

    source ids `(batch, T_x)` → embedding → dropout → `ConvolutionalEncoder` → memory
    `(batch, T_x, units)` and its masked mean `s` `(batch, units)`; `tanh(W_i s + b_i)` (one
    bridge per decoder state) → initial decoder state; target ids `(batch, T_y)` (teacher-forced,
    starting with START) → embedding → `BahdanauDecoder` → dropout → logits
    `(batch, T_y, target_vocabulary_size)`.

    The layers are named as in `rnn_attention_translator` (`source_embedding`, `source_dropout`,
    `encoder`, `bridge_<i>`, `target_embedding`, `target_dropout`, `decoder`, `output_dropout`,
    `output_projection`), so `keras_attn.models.RNNTranslatorSteps` decodes it with the
    encoder's memory and the decoder's cached states. Id 0 is padding in both vocabularies:
    padded source positions are zeroed before every convolution and get zero attention.

    Args:
        source_vocabulary_size, target_vocabulary_size: vocabulary sizes, padding id 0
            included.
        embedding_dim: size of both embeddings.
        units: width of the convolutions, the memory and the decoder state.
        kernel_width, num_layers, activation, positions, max_positions: the encoder's (see
            `ConvolutionalEncoder`).
        cell: `"lstm"` or `"gru"`, the decoder's cell.
        decoder_layers: the number of stacked decoder layers; each state of each layer starts
            from `s` through its own bridge.
        dropout: dropout on the embeddings, the convolutions' inputs, between decoder layers
            and on the decoder outputs.
        name: model name.

    Returns:
        A `keras.Model` with inputs `{"source_ids", "target_ids"}` and the logits as output.

    Raises:
        ValueError: an encoder argument out of range (see `ConvolutionalEncoder`) or an
            unknown `cell`.

    Example:

    >>> model = cnn_translator(50, 60, embedding_dim=8, units=16, num_layers=2)
    >>> [tuple(t.shape) for t in model.inputs], tuple(model.output.shape)
    ([(None, None), (None, None)], (None, None, 60))
    >>> model.get_layer("encoder").num_states
    2

    References:
        Gehring et al., 2017, "Convolutional Sequence to Sequence Learning", arXiv:1705.03122.
        Kalchbrenner and Blunsom, 2013, "Recurrent Continuous Translation Models", EMNLP.
        Bahdanau, Cho and Bengio, 2015, arXiv:1409.0473.
    """
    if cell not in CELLS:
        raise ValueError(f"Expected cell in {CELLS}. Received: cell={cell!r}")
    states_per_layer = 2 if cell == "lstm" else 1
    source_ids, target_ids = translator_inputs()
    source = keras.layers.Embedding(
        source_vocabulary_size, embedding_dim, mask_zero=True, name=SOURCE_EMBEDDING
    )(source_ids)
    source = keras.layers.Dropout(dropout, name=SOURCE_DROPOUT)(source)
    encoder = ConvolutionalEncoder(
        units,
        kernel_width=kernel_width,
        num_layers=num_layers,
        activation=activation,
        positions=positions,
        max_positions=max_positions,
        dropout=dropout,
        num_states=states_per_layer * decoder_layers,
        name=ENCODER,
    )
    memory, *final_states = encoder(source)  # (batch, T_x, units), s (batch, units) each
    initial_state = [
        keras.layers.Dense(units, activation="tanh", name=BRIDGE.format(index))(state)
        for index, state in enumerate(final_states)
    ]
    decoder = BahdanauDecoder(
        units, cell=cell, **stack_options(decoder_layers, dropout), name=DECODER
    )
    target = embed_target(target_ids, target_vocabulary_size, embedding_dim, dropout)
    outputs = decoder(target, memory, initial_state=initial_state)
    logits = project_outputs(outputs, target_vocabulary_size, dropout)
    return keras.Model({"source_ids": source_ids, "target_ids": target_ids}, logits, name=name)
