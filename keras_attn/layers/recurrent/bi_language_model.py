"""ELMo's bidirectional language model: separate forward and backward stacks, one softmax."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.recurrent._gru_form import check_gru_form, gru_form_kwargs

_CELLS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}


@keras_attn_export("keras_attn.layers.BiLanguageModel")
class BiLanguageModel(keras.layers.Layer):
    """Bidirectional language model (biLM) whose layers feed a downstream model (ELMo).

    Token ids `t_1..t_T` are embedded, `x_k = E[t_k]` `(batch, T, units)`, and read by two
    separate stacks of `L` recurrent layers, one left to right and one right to left (they share
    only the embedding and the softmax, as in Peters et al. 2018):

        fwd_{k,j} = LSTM_j^fwd(fwd_{1..k, j-1})      (batch, units)   fwd_{k,0} = x_k
        bwd_{k,j} = LSTM_j^bwd(bwd_{k..T, j-1})      (batch, units)   bwd_{k,0} = x_k
        h_{k,0} = [x_k; x_k],  h_{k,j} = [fwd_{k,j}; bwd_{k,j}]       (batch, 2 * units)
        p(t_{k+1} | t_1..t_k) = softmax(fwd_{k,L} W + b)              forward LM head
        p(t_{k-1} | t_k..t_T) = softmax(bwd_{k,L} W + b)              backward LM head

    With `residual=True`, layers `j > 1` add their input to their output. With `tie_embeddings`,
    `W = E^T` (plus a bias). The forward factor `p(t_k | t_1..t_{k-1})` and the backward one
    `p(t_k | t_{k+1}..t_N)` are those of Peters et al. (2018), eqs. 1-2. Training minimises the two
    cross-entropies (`language_model_loss`); a downstream model mixes `h_{k,0..L}` with
    `ScalarMix`.

    Args:
        vocabulary_size: number of token ids (0 is padding when `mask_zero`).
        units: embedding size and state size of every layer of each direction.
        num_layers: `L`, layers per direction (ELMo uses 2).
        cell: `"lstm"` or `"gru"`.
        residual: residual connections between layers (ELMo has one from layer 1 to layer 2).
        dropout: dropout rate on each layer's input above the embedding and on the LM heads'
            input.
        tie_embeddings: use the transposed embedding matrix as the softmax weights.
        mask_zero: id 0 is padding (used when no mask is given).
        use_cudnn: passed to Keras' `LSTM`/`GRU`; exporting sets False.
        reset_after: the GRU's form (`cell="gru"` only). True (the default, Keras' and cuDNN's):
            `h~ = tanh(x W_h + b_h + r ⊙ (h^(t-1) U_h + b'_h))`, the fused cuDNN kernel on a GPU.
            False: Cho et al.'s equations, `h~ = tanh(x W_h + (r ⊙ h^(t-1)) U_h + b_h)`, which
            have no cuDNN kernel (the generic loop on every device). False with an LSTM or with
            `use_cudnn=True` is a `ValueError`.

    Call arguments:
        inputs: int token ids `(batch, T)`.
        mask: bool `(batch, T)`; default `inputs != 0` with `mask_zero`, else no mask. Padded
            steps are skipped by both directions, and every output is 0 there.
        training: enables dropout.

    Returns:
        `(representations, forward_logits, backward_logits)`: `h_{k,0..L}` stacked on axis -2,
        `(batch, T, L + 1, 2 * units)`, and the two LM heads' logits `(batch, T, vocabulary_size)`
        (position `k` predicts `t_{k+1}` and `t_{k-1}` respectively). All three carry the mask.

    Example:

    >>> import numpy as np
    >>> bilm = BiLanguageModel(vocabulary_size=20, units=8, num_layers=2)
    >>> ids = np.array([[5, 6, 7, 0], [3, 2, 0, 0]])
    >>> representations, forward_logits, backward_logits = bilm(ids)
    >>> tuple(representations.shape), tuple(forward_logits.shape)
    ((2, 4, 3, 16), (2, 4, 20))
    >>> forward_loss, backward_loss = bilm.language_model_loss(ids, forward_logits, backward_logits)
    >>> bool(abs(float(forward_loss) - np.log(20)) < 0.5)
    True

    References:
        Peters et al., 2018, "Deep contextualized word representations", arXiv:1802.05365;
        Jozefowicz et al., 2016, "Exploring the limits of language modeling", arXiv:1602.02410.
    """

    def __init__(
        self,
        vocabulary_size: int,
        units: int,
        num_layers: int = 2,
        cell: str = "lstm",
        residual: bool = False,
        dropout: float = 0.0,
        tie_embeddings: bool = False,
        mask_zero: bool = True,
        use_cudnn="auto",
        reset_after: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (
            ("vocabulary_size", vocabulary_size),
            ("units", units),
            ("num_layers", num_layers),
        ):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(
                    f"Expected {name} to be a positive integer. Received: {name}={value!r}"
                )
        if cell not in _CELLS:
            raise ValueError(f"Expected cell in {sorted(_CELLS)}. Received: cell={cell!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"Expected dropout in [0, 1). Received: dropout={dropout!r}")
        self.vocabulary_size = vocabulary_size
        self.units = units
        self.num_layers = num_layers
        self.cell = cell
        self.residual = bool(residual)
        self.dropout = float(dropout)
        self.tie_embeddings = bool(tie_embeddings)
        self.mask_zero = bool(mask_zero)
        self.use_cudnn = use_cudnn
        self.reset_after = check_gru_form(cell, reset_after, use_cudnn)
        self.supports_masking = True

    def _rnn(self, direction: str, index: int) -> keras.layers.Layer:
        return _CELLS[self.cell](
            self.units,
            return_sequences=True,
            go_backwards=direction == "backward",
            use_cudnn=self.use_cudnn,
            **gru_form_kwargs(self.cell, self.reset_after),
            dtype=self.dtype_policy,
            name=f"{direction}_{self.cell}_{index}",
        )

    def build(self, inputs_shape):
        batch, steps = inputs_shape[0], inputs_shape[1]
        sequence_shape = (batch, steps, self.units)
        self.embedding = keras.layers.Embedding(
            self.vocabulary_size, self.units, name="token_embedding", dtype=self.dtype_policy
        )
        self.embedding.build(inputs_shape)
        self.forward_layers = [self._rnn("forward", i) for i in range(self.num_layers)]
        self.backward_layers = [self._rnn("backward", i) for i in range(self.num_layers)]
        for layer in self.forward_layers + self.backward_layers:
            layer.build(sequence_shape)
        self.dropout_layer = keras.layers.Dropout(
            self.dropout, name="dropout", dtype=self.dtype_policy
        )
        self.dropout_layer.build(sequence_shape)
        if self.tie_embeddings:
            self.softmax_bias = self.add_weight(
                name="softmax_bias", shape=(self.vocabulary_size,), initializer="zeros"
            )
        else:
            self.softmax = keras.layers.Dense(
                self.vocabulary_size, name="softmax", dtype=self.dtype_policy
            )
            self.softmax.build(sequence_shape)
        self.built = True

    def set_use_cudnn(self, use_cudnn) -> None:
        """Switch every recurrent layer's Cudnn kernel on/off (False before tracing an export)."""
        self.use_cudnn = use_cudnn
        for layer in self.forward_layers + self.backward_layers:
            layer.use_cudnn = use_cudnn

    def _logits(self, hidden, training):
        hidden = self.dropout_layer(hidden, training=training)
        if self.tie_embeddings:
            kernel = ops.cast(self.embedding.embeddings, self.compute_dtype)
            return ops.matmul(hidden, ops.transpose(kernel)) + ops.cast(
                self.softmax_bias, self.compute_dtype
            )
        return self.softmax(hidden)

    def _direction(self, embedded, layers, mask, training):
        """Per-layer sequences of one direction, in the original time order."""
        sequence, outputs = embedded, []
        for index, layer in enumerate(layers):
            layer_inputs = self.dropout_layer(sequence, training=training) if index else sequence
            output = layer(layer_inputs, mask=mask, training=training)
            if layer.go_backwards:
                output = ops.flip(output, axis=1)  # Keras returns a backward pass reversed
            if self.residual and index > 0:
                output = output + sequence
            outputs.append(output)
            sequence = output
        return outputs

    def call(self, inputs, mask=None, training=None):
        if mask is None and self.mask_zero:
            mask = ops.not_equal(inputs, 0)
        embedded = self.embedding(inputs)  # (batch, T, units)
        forward = self._direction(embedded, self.forward_layers, mask, training)
        backward = self._direction(embedded, self.backward_layers, mask, training)
        representations = [ops.concatenate([embedded, embedded], axis=-1)] + [
            ops.concatenate([f, b], axis=-1) for f, b in zip(forward, backward, strict=True)
        ]
        representations = ops.stack(representations, axis=-2)  # (batch, T, L + 1, 2 * units)
        forward_logits = self._logits(forward[-1], training)  # (batch, T, vocabulary_size)
        backward_logits = self._logits(backward[-1], training)
        outputs = (representations, forward_logits, backward_logits)
        if mask is None:
            return outputs
        keep = ops.expand_dims(mask, -1)
        return tuple(
            ops.where(keep if x.ndim == 3 else ops.expand_dims(keep, -1), x, ops.zeros_like(x))
            for x in outputs
        )

    def compute_mask(self, inputs, mask=None):
        if mask is None and self.mask_zero:
            mask = ops.not_equal(inputs, 0)
        return (mask, mask, mask)

    def language_model_loss(self, token_ids, forward_logits, backward_logits, mask=None):
        """Mean cross-entropies `(forward, backward)` of the two LM heads, float32 scalars.

        The forward head at position `k` is scored on `t_{k+1}`, the backward head on `t_{k-1}`;
        only pairs of real positions count (`mask`, default `token_ids != 0` with `mask_zero`).
        `exp` of each is that direction's perplexity.
        """
        if mask is None:
            mask = (
                ops.not_equal(token_ids, 0) if self.mask_zero else ops.ones_like(token_ids, "bool")
            )
        mask = ops.cast(mask, "bool")
        pairs = ops.cast(ops.logical_and(mask[:, 1:], mask[:, :-1]), "float32")  # (batch, T - 1)

        def cross_entropy(logits, targets):
            losses = keras.losses.sparse_categorical_crossentropy(
                targets, ops.cast(logits, "float32"), from_logits=True
            )
            return ops.sum(losses * pairs) / ops.maximum(ops.sum(pairs), 1.0)

        return (
            cross_entropy(forward_logits[:, :-1], token_ids[:, 1:]),
            cross_entropy(backward_logits[:, 1:], token_ids[:, :-1]),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self,
                "vocabulary_size",
                "units",
                "num_layers",
                "cell",
                "residual",
                "dropout",
                "tie_embeddings",
                "mask_zero",
                "use_cudnn",
                "reset_after",
            )
        )
        return config
