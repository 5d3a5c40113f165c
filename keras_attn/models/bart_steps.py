"""The cached step-contract view of a `bart` model or of a `bart_translator`."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.models.bart import (
    DECODER,
    DECODER_EMBEDDING_NORM,
    EMBEDDING,
    ENCODER,
    ENCODER_EMBEDDING_NORM,
    SOURCE_EMBEDDING,
    SOURCE_ENCODER,
)


@keras_attn_export("keras_attn.models.BartSteps")
class BartSteps:
    """`encode` and `step` functions over the layers of a BART encoder–decoder, with KV caches.

    They reuse the model's own layers (looked up by name, so a `.keras` reload works); dropout is
    off. `encode` runs the source side once — `LN(E[x] + P_x)`, or the new source encoder of a
    `bart_translator(..., new_source_encoder_layers=K)` followed by that LN — then BART's
    encoder, and projects the memory into every decoder block's cross-attention keys/values
    once. Each `step` embeds one token at its position (`LN(E[y_t] + P_t)`), writes its
    self-attention keys/values at that position of caches preallocated for `max_length`
    positions, attends over the cache and projects with the tied embedding (`h E^T`). Every state
    tensor keeps its shape from step to step, so `greedy_search`, `beam_search` and `sample` run
    the loop in `keras.ops.while_loop`, and it exports.

    - `encode(source_ids (batch, T_x)) -> state`
    - `step(token_ids (batch,), state) -> (logits (batch, V) float32, state)`

    The state is a dict: `cache` (one dict per decoder block: `self_key`/`self_value`
    `(batch, heads, max_length, d / heads)`, `cross_key`/`cross_value`
    `(batch, heads, T_x, d / heads)`), `memory_mask` `(batch, T_x)` bool, `index` (int32 scalar:
    the position of the next token, shared by every row) and `attention` `(batch, T_x)` float32:
    the last decoder layer's cross-attention weights of the latest token, averaged over heads.

    Args:
        model: a model returned by `keras_attn.models.bart` or `bart_translator` (or loaded from
            its `.keras` file).
        max_length: the most tokens a decoding loop may feed (the cache length); at most the
            model's number of learned positions.
        pad_id: the source padding id (0).

    Example:

    >>> import numpy as np
    >>> from keras_attn.decoding import greedy_search
    >>> from keras_attn.models import bart
    >>> model = bart(20, num_layers=1, d_model=8, num_heads=2, ff_dim=16, max_length=10)
    >>> steps = BartSteps(model, max_length=5)
    >>> state = steps.encode(np.array([[4, 5, 6]]))
    >>> result = greedy_search(steps.step, state, 1, start_id=2, end_id=3, max_length=5)
    >>> tuple(result.ids.shape), tuple(result.alignments.shape)
    ((1, 5), (1, 5, 3))

    References:
        Lewis et al., 2019, "BART: Denoising Sequence-to-Sequence Pre-training for Natural
        Language Generation, Translation, and Comprehension", arXiv:1910.13461.
    """

    def __init__(self, model: keras.Model, max_length: int = 128, pad_id: int = 0):
        self.model = model
        self.pad_id = pad_id
        self._find_layers(model)
        positions = self.target_embedding.max_length
        if int(max_length) <= 0 or (positions is not None and int(max_length) > positions):
            raise ValueError(
                f"Expected max_length in [1, {positions}] (the model's target positions). "
                f"Received: max_length={max_length}"
            )
        self.max_length = int(max_length)

    def _find_layers(self, model: keras.Model) -> None:
        """Look up the model's layers by name: embeddings, norms, encoder(s) and decoder."""
        self.encoder = model.get_layer(ENCODER)
        self.decoder = model.get_layer(DECODER)
        self.target_embedding = model.get_layer(EMBEDDING)
        self.target_norm = model.get_layer(DECODER_EMBEDDING_NORM)
        self.source_norm = model.get_layer(ENCODER_EMBEDDING_NORM)
        if SOURCE_ENCODER in {layer.name for layer in model.layers}:
            self.source_embedding = model.get_layer(SOURCE_EMBEDDING)
            self.source_encoder = model.get_layer(SOURCE_ENCODER)
        else:
            self.source_embedding = self.target_embedding
            self.source_encoder = None

    def _source_inputs(self, source_ids, memory_mask):
        """The encoder's input `(batch, T_x, d)` for source ids `(batch, T_x)`."""
        embedded = self.source_embedding(source_ids, training=False)
        if self.source_encoder is not None:
            embedded = self.source_encoder(embedded, inputs_mask=memory_mask, training=False)
        return self.source_norm(embedded)

    def _target_inputs(self, token_ids, index):
        """The decoder's input `(batch, 1, d)` for one token per row `(batch, 1)` at `index`."""
        # `call`, not `__call__`: no Keras mask on the (batch, 1) step input; a fed PAD (a
        # finished row) must not mask the whole cache.
        embedded = self.target_embedding.call(token_ids, start_index=index, training=False)
        return self.target_norm(embedded)

    def _project(self, hidden):
        """Logits `(..., V)` of decoder outputs `(..., d)`: the tied `h E^T`."""
        return self.target_embedding(hidden, reverse=True)

    def encode(self, source_ids) -> dict:
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        memory_mask = ops.not_equal(source_ids, self.pad_id)  # (batch, T_x)
        inputs = self._source_inputs(source_ids, memory_mask)
        memory = self.encoder(inputs, inputs_mask=memory_mask, training=False)
        cache = self.decoder.initial_cache(ops.shape(source_ids)[0], self.max_length, memory)
        return {
            "cache": cache,
            "memory_mask": memory_mask,
            "index": ops.convert_to_tensor(0, "int32"),
            "attention": ops.zeros(ops.shape(memory_mask), dtype="float32"),
        }

    def step(self, token_ids, state: dict):
        index = state["index"]
        token_ids = ops.expand_dims(ops.convert_to_tensor(token_ids, "int32"), 1)  # (batch, 1)
        hidden, scores, cache = self.decoder(
            self._target_inputs(token_ids, index),
            memory_mask=state["memory_mask"],
            cache=state["cache"],
            cache_index=index,
            training=False,
            return_attention_scores=True,
        )
        logits = self._project(hidden[:, 0])  # (batch, d) -> (batch, V): a plain matmul
        # (batch, layers, heads, 1, T_x) -> last layer, mean over heads -> (batch, T_x)
        attention = ops.mean(ops.cast(scores["cross_attention"][:, -1, :, 0], "float32"), axis=1)
        new_state = {
            "cache": cache,
            "memory_mask": state["memory_mask"],
            "index": index + 1,
            "attention": attention,
        }
        return ops.cast(logits, "float32"), new_state
