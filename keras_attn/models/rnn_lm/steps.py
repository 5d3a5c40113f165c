"""The step-contract view of an `rnn_lm` model: prompt prefill, then one token per step."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.models.rnn_lm.model import (
    EMBEDDING,
    EMBEDDING_DROPOUT,
    LOGITS,
    OUTPUT_DROPOUT,
    RNN,
)


@keras_attn_export("keras_attn.models.RNNLMSteps")
class RNNLMSteps:
    """`prefill` and `step` functions over the layers of a recurrent language model.

    They reuse the model's own layers (looked up by name, so a `.keras` reload works); dropout is
    off with `training=False` (decoding) and on with `training=True`, as in
    `model(..., training=True)`. The recurrent states of every layer are the whole cache: a step
    costs one cell update per layer, whatever the length so far.

    - `prefill(prompt_ids (batch, P), training=None) -> state`: the prompts, right-padded with
      `pad_id` (each with at least one token), run through the stack in one masked pass; each
      row's states after its last real token and the logits there are kept in the state.
    - `step(token_ids (batch,), state, training=None) -> (logits (batch, V) float32, state)`.

    `training=None` in a call means the view's own `training`.

    The first `step` returns those prompt logits and leaves the states as they are: the token
    it is given (a decoding loop's START) is not read. Every later step feeds the previously
    chosen token through each layer's cell:

        x = dropout(E[token])                               (batch, embedding_dim)
        h_l, states_l = cell_l(dropout(h_{l-1}), states_l)  (batch, units), h_0 = x
        h_l = h_l + h_{l-1}   for l >= 3 (the stack's residual connections)
        logits = dropout(h_L) W + b                         (batch, V) float32

    So `greedy_search(steps.step, steps.prefill(prompts), …)` continues each prompt, and every
    state tensor keeps its shape: the loop runs in `keras.ops.while_loop` and exports.

    State: `states` (every layer's `[h, c]` (LSTM) or `[h]` (GRU), bottom layer first, each
    `(batch, units)`), `prompt_logits` `(batch, V)` float32 and the int32 scalar `started` (0
    before the first step, then 1; shared by every row, so beam search leaves it as it is).

    Args:
        model: a model returned by `keras_attn.models.rnn_lm` (or loaded from its `.keras`
            file).
        pad_id: the padding id of the prompts (0).
        training: run the layers in training mode (dropout on) unless a call says otherwise.

    Example:

    >>> import numpy as np
    >>> from keras_attn.decoding import greedy_search
    >>> from keras_attn.models import rnn_lm
    >>> model = rnn_lm(20, embedding_dim=4, units=8)
    >>> steps = RNNLMSteps(model)
    >>> state = steps.prefill(np.array([[4, 5, 6], [7, 0, 0]]))
    >>> result = greedy_search(steps.step, state, 2, start_id=2, end_id=3, max_length=6)
    >>> tuple(result.ids.shape)
    (2, 6)

    References:
        Graves, 2013, "Generating sequences with recurrent neural networks", arXiv:1308.0850.
    """

    def __init__(self, model: keras.Model, pad_id: int = 0, training: bool = False):
        self.model = model
        self.pad_id = pad_id
        self.training = bool(training)
        self.embedding = model.get_layer(EMBEDDING)
        self.embedding_dropout = model.get_layer(EMBEDDING_DROPOUT)
        self.rnn = model.get_layer(RNN)
        self.output_dropout = model.get_layer(OUTPUT_DROPOUT)
        self.projection = model.get_layer(LOGITS)

    def _training(self, training: bool | None) -> bool:
        return self.training if training is None else bool(training)

    def _embed(self, token_ids, training: bool):
        return self.embedding_dropout(self.embedding(token_ids), training=training)

    def _logits(self, hidden, training: bool):
        hidden = self.output_dropout(hidden, training=training)
        return ops.cast(self.projection(hidden), "float32")

    def prefill(self, prompt_ids, training: bool | None = None) -> dict:
        """The state before the first step: the prompts' states and their next-token logits."""
        training = self._training(training)
        prompt_ids = ops.convert_to_tensor(prompt_ids, "int32")
        real = ops.not_equal(prompt_ids, self.pad_id)  # (batch, P)
        lengths = ops.sum(ops.cast(real, "int32"), axis=1)  # (batch,)
        # Padded steps leave every layer's states as they are: the final states follow the
        # last real token.
        hidden, *states = self.rnn(self._embed(prompt_ids, training), mask=real, training=training)
        last = ops.take_along_axis(hidden, ops.reshape(lengths - 1, (-1, 1, 1)), axis=1)
        return {
            "states": tuple(states),
            "prompt_logits": self._logits(last[:, 0], training),  # (batch, V)
            "started": ops.convert_to_tensor(0, "int32"),
        }

    def step(self, token_ids, state: dict, training: bool | None = None):
        """`(logits (batch, V) float32, new state)` after feeding `token_ids` `(batch,)`."""
        training = self._training(training)
        token_ids = ops.convert_to_tensor(token_ids, "int32")
        # One column (batch, 1, d) -> (batch, d); the slice carries no Keras mask to the cells.
        embedded = self._embed(ops.expand_dims(token_ids, 1), training)[:, 0]
        hidden, states = self._step_stack(embedded, list(state["states"]), training)
        started = ops.equal(state["started"], 1)
        logits = ops.where(started, self._logits(hidden, training), state["prompt_logits"])
        new_state = {
            "states": tuple(
                ops.where(started, new, old)
                for new, old in zip(states, state["states"], strict=True)
            ),
            "prompt_logits": state["prompt_logits"],
            "started": ops.convert_to_tensor(1, "int32"),
        }
        return logits, new_state

    def _step_stack(self, inputs, states: list, training: bool) -> tuple:
        """One step of the recurrent stack: `(h_L (batch, units), every layer's new states)`,
        as `UnidirectionalEncoder` runs its layers over a sequence."""
        count = self.rnn.states_per_layer
        output, new_states = None, []
        for index, layer in enumerate(self.rnn.rnns):
            layer_inputs = inputs
            if index > 0:
                layer_inputs = self.rnn.layer_dropouts[index - 1](output, training=training)
            layer_states = states[index * count : (index + 1) * count]
            layer_output, layer_states = layer.cell(layer_inputs, layer_states, training=training)
            if not isinstance(layer_states, (list, tuple)):
                layer_states = [layer_states]
            output = layer_output + output if index >= 2 else layer_output
            new_states.extend(layer_states)
        return output, new_states
