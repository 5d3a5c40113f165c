"""The cached step-contract view of a `gpt` model: prompt prefill, then one token per step."""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import ConfigError
from keras_attn.models.gpt.model import DECODER, EMBEDDING


@keras_attn_export("keras_attn.models.GPTSteps")
class GPTSteps:
    """`prefill` and `step` functions over the layers of a GPT model, with a KV cache.

    They reuse the model's own layers (looked up by name, so a `.keras` reload works); dropout is
    off with `training=False` (decoding) and on with `training=True`, as in
    `model(..., training=True)`.

    - `prefill(prompt_ids (batch, P), training=None) -> state`: the prompts, right-padded with
      `pad_id` (each with at least one token), go through the decoder in ONE cached call that
      writes their keys/values at cache slots `0..P-1`; the logits after each prompt's last real
      token are kept in the state.
    - `step(token_ids (batch,), state, training=None) -> (logits (batch, V) float32, state)`.

    `training=None` in a call means the view's own `training`.

    The first `step` returns those prompt logits: the token it is given (a decoding loop's START)
    is written to a cache slot that stays masked and is never attended to. Every later step feeds
    the previously chosen token at its row's own position (`prompt length + tokens so far`),
    writes its keys/values at the next cache slot and attends over the prompt's real slots and
    the generated ones. So `greedy_search(steps.step, steps.prefill(prompts), …)` continues each
    prompt, and every state tensor keeps its shape (caches preallocated to `max_length` slots):
    the loop runs in `keras.ops.while_loop` and exports.

    State: `cache` (one `self_key`/`self_value` dict per block, `(batch, heads, max_length,
    d / heads)`), `key_mask` `(batch, max_length)` bool (slots to attend to), `positions`
    `(batch,)` int32 (the position of the next fed token), `prompt_logits` `(batch, V)` float32,
    and the int32 scalars `index` (the next cache slot) and `started` (0 before the first step,
    then 1). Scalars are shared by every row, so beam search leaves them as they are.

    Args:
        model: a model returned by `keras_attn.models.gpt` (or loaded from its `.keras` file).
        max_length: cache slots: the padded prompt width plus the decoding loop's `max_length`
            must not exceed it; at most the model's number of learned positions.
        pad_id: the padding id of the prompts (0).
        training: run the layers in training mode (dropout on) unless a call says otherwise.

    Raises:
        ConfigError: `max_length` is not positive or exceeds the model's positions.

    Example:

    >>> import numpy as np
    >>> from keras_attn.decoding import greedy_search
    >>> from keras_attn.models import gpt
    >>> model = gpt(20, num_layers=1, d_model=8, num_heads=2, ff_dim=16, max_length=12)
    >>> steps = GPTSteps(model, max_length=12)
    >>> state = steps.prefill(np.array([[4, 5, 6], [7, 0, 0]]))
    >>> result = greedy_search(steps.step, state, 2, start_id=2, end_id=3, max_length=6)
    >>> tuple(result.ids.shape)
    (2, 6)
    """

    def __init__(
        self,
        model: keras.Model,
        max_length: int = 128,
        pad_id: int = 0,
        training: bool = False,
    ):
        self.model = model
        self.training = bool(training)
        self.embedding = model.get_layer(EMBEDDING)
        self.decoder = model.get_layer(DECODER)
        positions = self.positions(model)
        if int(max_length) <= 0 or (positions is not None and int(max_length) > positions):
            raise ConfigError(
                f"Expected max_length in [1, {positions}] (the model's positions). "
                f"Received: max_length={max_length}",
                ["max_length"],
            )
        self.max_length = int(max_length)
        self.pad_id = pad_id

    @staticmethod
    def positions(model: keras.Model) -> int | None:
        """The learned positions of a `gpt` model: the most tokens a view of it decodes."""
        return model.get_layer(EMBEDDING).max_length

    def _training(self, training: bool | None) -> bool:
        return self.training if training is None else bool(training)

    def _project(self, hidden):
        return ops.cast(self.embedding(hidden, reverse=True), "float32")

    def prefill(self, prompt_ids, training: bool | None = None) -> dict:
        """The state before the first step: the prompts' caches and their next-token logits."""
        training = self._training(training)
        prompt_ids = ops.convert_to_tensor(prompt_ids, "int32")
        batch, width = ops.shape(prompt_ids)[0], ops.shape(prompt_ids)[1]
        real = ops.not_equal(prompt_ids, self.pad_id)  # (batch, P)
        lengths = ops.sum(ops.cast(real, "int32"), axis=1)  # (batch,)
        key_mask = ops.pad(real, [[0, 0], [0, self.max_length - width]])  # (batch, S)
        positions = ops.broadcast_to(ops.arange(width, dtype="int32"), (batch, width))
        hidden, cache = self.decoder(
            self._embed(prompt_ids, positions, training),
            inputs_mask=real,
            attention_mask=ops.broadcast_to(
                ops.expand_dims(key_mask, 1), (batch, width, self.max_length)
            ),
            cache=self.decoder.initial_cache(batch, self.max_length),
            cache_index=0,
            training=training,
        )
        last = ops.take_along_axis(hidden, ops.reshape(lengths - 1, (-1, 1, 1)), axis=1)
        return {
            "cache": cache,
            "key_mask": key_mask,
            "positions": lengths,
            "prompt_logits": self._project(last)[:, 0],
            "index": ops.convert_to_tensor(width, "int32"),
            "started": ops.convert_to_tensor(0, "int32"),
        }

    def _embed(self, token_ids, positions, training: bool):
        """`E[ids] (· sqrt(d)) + P[positions]`, `(batch, T, d)`, for ids and positions `(batch, T)`.

        The model's embedding layer (its dropout included), with a position per token instead of
        a start index; the result carries no Keras mask (padding is passed to the decoder
        explicitly).
        """
        embedded = self.embedding.token_embedding(token_ids)
        if self.embedding.scale_embeddings:
            embedded = embedded * ops.cast(math.sqrt(self.embedding.embedding_dim), embedded.dtype)
        table = self.embedding.position_layer(  # (max_length, d), whichever encoding
            ops.zeros((1, self.max_length, self.embedding.embedding_dim), embedded.dtype)
        )[0]
        embedded = embedded + ops.take(table, positions, axis=0)
        return self.embedding.dropout_layer(embedded, training=training)

    def step(self, token_ids, state: dict, training: bool | None = None):
        """`(logits (batch, V) float32, new state)` after feeding `token_ids` `(batch,)`."""
        training = self._training(training)
        index, started = state["index"], state["started"]
        token_ids = ops.convert_to_tensor(token_ids, "int32")
        slot = ops.logical_and(
            ops.equal(ops.arange(self.max_length, dtype="int32"), index), ops.equal(started, 1)
        )
        key_mask = ops.logical_or(state["key_mask"], ops.expand_dims(slot, 0))
        hidden, cache = self.decoder(
            self._embed(
                ops.expand_dims(token_ids, 1), ops.expand_dims(state["positions"], 1), training
            ),
            attention_mask=ops.expand_dims(key_mask, 1),  # (batch, 1, S)
            cache=state["cache"],
            cache_index=index,
            training=training,
        )
        next_logits = self._project(hidden[:, 0])  # (batch, d) -> (batch, V): a plain matmul
        logits = ops.where(ops.equal(started, 1), next_logits, state["prompt_logits"])
        new_state = {
            "cache": cache,
            "key_mask": key_mask,
            "positions": state["positions"] + started,
            "prompt_logits": state["prompt_logits"],
            "index": index + 1,
            "started": ops.convert_to_tensor(1, "int32"),
        }
        return logits, new_state
