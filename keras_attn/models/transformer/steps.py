"""The cached step-contract view of the Transformer encoder–decoders: `transformer_translator`,
`bart`, `bart_translator` and `bertsum_translator`."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import ConfigError

# The layer that plays each part, by the names the builders give their layers: the first name
# the model has. `transformer_translator` shares one embedding or has a source and a target
# one; `bart` embeds both sides with one table, `bart_translator(..., new_source_encoder_layers=K)`
# reads the source through a new embedding and encoder; `bertsum_translator` puts BERT's
# embedding under a decoder with an embedding of its own.
_PARTS = {
    "source_embedding": ("source_embedding", "shared_embedding", "embedding"),
    "segment_embedding": ("segment_embedding",),
    "source_encoder": ("source_encoder",),
    "source_norm": ("encoder_embedding_norm", "embedding_norm"),
    "encoder": ("encoder",),
    "target_embedding": ("decoder_embedding", "target_embedding", "shared_embedding", "embedding"),
    "target_norm": ("decoder_embedding_norm",),
    "decoder": ("decoder",),
}
_REQUIRED = ("source_embedding", "encoder", "target_embedding", "decoder")


@keras_attn_export(
    [
        "keras_attn.models.TransformerTranslatorSteps",
        "keras_attn.models.BartSteps",
        "keras_attn.models.BertSumSteps",
    ]
)
class TransformerTranslatorSteps:
    """`encode` and `step` functions over the layers of a Transformer encoder–decoder, with
    KV caches.

    They reuse the model's own layers (looked up by name, so a `.keras` reload works); dropout is
    off with `training=False` (decoding) and on with `training=True`, as in
    `model(..., training=True)`. `encode` runs the source side once and projects the memory into
    every decoder block's cross-attention keys/values once; each `step` embeds one token at its
    position, writes its self-attention keys/values at that position of caches preallocated for
    `max_length` positions, attends over the cache and projects with the tied target embedding
    (`h E^T`). Every state tensor keeps its shape from step to step, so `greedy_search`,
    `beam_search` and `sample` run the loop in `keras.ops.while_loop`, and it exports.

    - `encode(source_ids (batch, T_x), training=None) -> state`
    - `step(token_ids (batch,), state, training=None) -> (logits (batch, V) float32, state)`

    `training=None` in a call means the view's own `training`. The source and target sides are
    found by layer name, so one view serves:

    - `transformer_translator`: `E[x]·sqrt(d) + PE` into the encoder; `E_y[y_t]·sqrt(d) + PE_t`
      into the decoder (one shared table or two).
    - `bart` / `bart_translator`: `LN(E[x] + P_x)` — or the new source encoder of a
      `bart_translator(..., new_source_encoder_layers=K)` followed by that LN — into BART's
      encoder; `LN(E[y_t] + P_t)` into the decoder; `max_length` is at most the model's learned
      positions (Lewis et al., 2019, arXiv:1910.13461).
    - `bertsum_translator`: BERT's `LN(E[x] + P_x (+ S[0]))` into its encoder; the decoder's own
      embedding on the target side (Liu & Lapata, 2019, arXiv:1908.08345).

    A model with other layers subclasses this class and overrides the hooks `_source_inputs`,
    `_target_inputs` or `_project`. `BartSteps` and `BertSumSteps` are other names of this class.

    The state is a dict: `cache` (one dict per decoder block: `self_key`/`self_value`
    `(batch, heads, max_length, d / heads)`, `cross_key`/`cross_value`
    `(batch, heads, T_x, d / heads)`), `memory_mask` `(batch, T_x)` bool, `index` (int32 scalar:
    the position of the next token; scalars are shared by every row, so beam search leaves it
    as is) and `attention` `(batch, T_x)` float32: the last decoder layer's cross-attention
    weights of the latest token, averaged over heads (the alignment of the exported
    `translate_with_alignment`).

    Args:
        model: a model returned by `keras_attn.models.transformer_translator`, `bart`,
            `bart_translator` or `bertsum_translator` (or loaded from its `.keras` file).
        max_length: the most tokens a decoding loop may feed (the cache length); greedy and beam
            search must be run with `max_length` no larger. At most the model's number of
            learned target positions, where it has learned positions.
        pad_id: the source padding id (0).
        training: run the layers in training mode (dropout on) unless a call says otherwise.

    Raises:
        ConfigError: `max_length` is not positive or exceeds the learned positions.

    Example:

    >>> import numpy as np
    >>> from keras_attn.decoding import greedy_search
    >>> from keras_attn.models import bart, transformer_translator
    >>> model = transformer_translator(20, 20, num_layers=1, d_model=8, num_heads=2, ff_dim=16)
    >>> steps = TransformerTranslatorSteps(model, max_length=5)
    >>> state = steps.encode(np.array([[4, 5, 6]]))
    >>> result = greedy_search(steps.step, state, 1, start_id=2, end_id=3, max_length=5)
    >>> tuple(result.ids.shape), tuple(result.alignments.shape)
    ((1, 5), (1, 5, 3))
    >>> model = bart(20, num_layers=1, d_model=8, num_heads=2, ff_dim=16, max_length=10)
    >>> steps = BartSteps(model, max_length=5)
    >>> result = greedy_search(steps.step, steps.encode(np.array([[4, 5, 6]])), 1, 2, 3, 5)
    >>> tuple(result.ids.shape)
    (1, 5)

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762.
    """

    def __init__(
        self,
        model: keras.Model,
        max_length: int = 128,
        pad_id: int = 0,
        training: bool = False,
    ):
        self.model = model
        self.pad_id = pad_id
        self.training = bool(training)
        layer_names = {layer.name for layer in model.layers}
        for part, candidates in _PARTS.items():
            found = [name for name in candidates if name in layer_names]
            if not found and part in _REQUIRED:
                raise ConfigError(
                    f"model={model.name!r} has no layer named {' or '.join(map(repr, candidates))}"
                    " for the step view's " + part.replace("_", " "),
                    ["model"],
                )
            setattr(self, part, model.get_layer(found[0]) if found else None)
        positions = getattr(self.target_embedding, "max_length", None)
        if int(max_length) <= 0 or (positions is not None and int(max_length) > positions):
            expected = (
                "a positive max_length"
                if positions is None
                else f"max_length in [1, {positions}] (the model's target positions)"
            )
            raise ConfigError(
                f"Expected {expected}. Received: max_length={max_length}", ["max_length"]
            )
        self.max_length = int(max_length)

    def _training(self, training: bool | None) -> bool:
        return self.training if training is None else bool(training)

    def _source_inputs(self, source_ids, memory_mask, training: bool):
        """Hook: the encoder's input `(batch, T_x, d)` for source ids `(batch, T_x)`."""
        embedded = self.source_embedding(source_ids, training=training)
        if self.segment_embedding is not None:  # every source token in segment 0
            embedded = embedded + self.segment_embedding(
                ops.zeros_like(source_ids), training=training
            )
        if self.source_encoder is not None:
            embedded = self.source_encoder(embedded, inputs_mask=memory_mask, training=training)
        if self.source_norm is not None:
            embedded = self.source_norm(embedded, training=training)
        return embedded

    def _target_inputs(self, token_ids, index, training: bool):
        """Hook: the decoder's input `(batch, 1, d)` for one token per row `(batch, 1)` at
        position `index`."""
        # `call`, not `__call__`: no Keras mask on the (batch, 1) step input; a fed PAD (a
        # finished row) must not mask the whole cache.
        embedded = self.target_embedding.call(token_ids, start_index=index, training=training)
        if self.target_norm is not None:
            embedded = self.target_norm(embedded, training=training)
        return embedded

    def _project(self, hidden):
        """Hook: logits `(..., V)` of decoder outputs `(..., d)`: the tied `h E^T`."""
        return self.target_embedding(hidden, reverse=True)

    def encode(self, source_ids, training: bool | None = None) -> dict:
        """The state before the first step: the source's cross-attention caches."""
        training = self._training(training)
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        memory_mask = ops.not_equal(source_ids, self.pad_id)  # (batch, T_x)
        inputs = self._source_inputs(source_ids, memory_mask, training)
        memory = self.encoder(inputs, inputs_mask=memory_mask, training=training)
        cache = self.decoder.initial_cache(ops.shape(source_ids)[0], self.max_length, memory)
        return {
            "cache": cache,
            "memory_mask": memory_mask,
            "index": ops.convert_to_tensor(0, "int32"),
            "attention": ops.zeros(ops.shape(memory_mask), dtype="float32"),
        }

    def step(self, token_ids, state: dict, training: bool | None = None):
        """`(logits (batch, V) float32, new state)` after feeding `token_ids` `(batch,)`."""
        training = self._training(training)
        index = state["index"]
        token_ids = ops.expand_dims(ops.convert_to_tensor(token_ids, "int32"), 1)  # (batch, 1)
        hidden, scores, cache = self.decoder(
            self._target_inputs(token_ids, index, training),
            memory_mask=state["memory_mask"],
            cache=state["cache"],
            cache_index=index,
            training=training,
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


BartSteps = TransformerTranslatorSteps
BertSumSteps = TransformerTranslatorSteps
