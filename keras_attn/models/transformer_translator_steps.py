"""The cached step-contract view of a model built by `transformer_translator`."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.models.transformer_translator import (
    DECODER,
    ENCODER,
    SHARED_EMBEDDING,
    SOURCE_EMBEDDING,
    TARGET_EMBEDDING,
)


@keras_attn_export("keras_attn.models.TransformerTranslatorSteps")
class TransformerTranslatorSteps:
    """`encode` and `step` functions over the layers of a trained Transformer translator.

    They reuse the model's own layers (looked up by name, so a `.keras` reload works); dropout is
    off. Decoding is cached: `encode` runs the encoder once and projects the memory into every
    decoder block's cross-attention keys/values once; each `step` embeds one token at its
    position, writes its self-attention keys/values at that position of caches preallocated for
    `max_length` positions, and attends over the cache. Every state tensor keeps its shape from
    step to step, so the loop runs in `keras.ops.while_loop` and exports.

    - `encode(source_ids (batch, T_x)) -> state`
    - `step(token_ids (batch,), state) -> (logits (batch, V) float32, state)`

    The state is a dict: `cache` (one dict per decoder block: `self_key`/`self_value`
    `(batch, heads, max_length, d / heads)`, `cross_key`/`cross_value`
    `(batch, heads, T_x, d / heads)`), `memory_mask` `(batch, T_x)` bool, `index` (int32 scalar:
    the position of the next token; scalars are shared by every row, so beam search leaves it
    as is) and `attention` `(batch, T_x)` float32: the last decoder layer's cross-attention
    weights of the latest token, averaged over heads (the alignment of the exported
    `translate_with_alignment`).

    Args:
        model: a model returned by `keras_attn.models.transformer_translator` (or loaded from
            its `.keras` file).
        max_length: the most tokens a decoding loop may feed (the cache length); greedy and beam
            search must be run with `max_length` no larger.
        pad_id: the source padding id (0).

    Example:

    >>> import numpy as np
    >>> from keras_attn.decoding import greedy_search
    >>> from keras_attn.models import transformer_translator
    >>> model = transformer_translator(20, 20, num_layers=1, d_model=8, num_heads=2, ff_dim=16)
    >>> steps = TransformerTranslatorSteps(model, max_length=5)
    >>> state = steps.encode(np.array([[4, 5, 6]]))
    >>> result = greedy_search(steps.step, state, 1, start_id=2, end_id=3, max_length=5)
    >>> tuple(result.ids.shape), tuple(result.alignments.shape)
    ((1, 5), (1, 5, 3))
    """

    def __init__(self, model: keras.Model, max_length: int = 128, pad_id: int = 0):
        if int(max_length) <= 0:
            raise ValueError(f"Expected a positive max_length. Received: max_length={max_length}")
        self.model = model
        self.max_length = int(max_length)
        self.pad_id = pad_id
        layer_names = {layer.name for layer in model.layers}
        if SHARED_EMBEDDING in layer_names:
            self.source_embedding = model.get_layer(SHARED_EMBEDDING)
            self.target_embedding = self.source_embedding
        else:
            self.source_embedding = model.get_layer(SOURCE_EMBEDDING)
            self.target_embedding = model.get_layer(TARGET_EMBEDDING)
        self.encoder = model.get_layer(ENCODER)
        self.decoder = model.get_layer(DECODER)

    def encode(self, source_ids) -> dict:
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        memory_mask = ops.not_equal(source_ids, self.pad_id)  # (batch, T_x)
        embedded = self.source_embedding(source_ids, training=False)
        memory = self.encoder(embedded, inputs_mask=memory_mask, training=False)
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
        # `call`, not `__call__`: no Keras mask on the (batch, 1) step input; a fed PAD (a
        # finished row) must not mask the whole cache.
        embedded = self.target_embedding.call(token_ids, start_index=index, training=False)
        hidden, scores, cache = self.decoder(
            embedded,
            memory_mask=state["memory_mask"],
            cache=state["cache"],
            cache_index=index,
            training=False,
            return_attention_scores=True,
        )
        # (batch, d) -> (batch, V): a plain matmul (on (batch, 1, d) it would be a tensordot)
        logits = self.target_embedding(hidden[:, 0], reverse=True)
        # (batch, layers, heads, 1, T_x) -> last layer, mean over heads -> (batch, T_x)
        attention = ops.mean(ops.cast(scores["cross_attention"][:, -1, :, 0], "float32"), axis=1)
        new_state = {
            "cache": cache,
            "memory_mask": state["memory_mask"],
            "index": index + 1,
            "attention": attention,
        }
        return ops.cast(logits, "float32"), new_state
