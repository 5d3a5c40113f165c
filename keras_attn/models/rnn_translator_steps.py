"""The step-contract view of a model built by `rnn_attention_translator`."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.models import rnn_translator as names


@keras_attn_export("keras_attn.models.RNNTranslatorSteps")
class RNNTranslatorSteps:
    """`encode` and `step` functions over the layers of a trained RNN translator.

    They reuse the model's own layers (looked up by name, so a `.keras` reload works), hence the
    exact weights that teacher-forced training used; dropout is off.

    - `encode(source_ids (batch, T_x)) -> state`
    - `step(token_ids (batch,), state) -> (logits (batch, V) float32, state)`

    The state is a dict: `memory` `(batch, T_x, units)`, `prepared_memory` (the key-only part of
    the score), `memory_mask` `(batch, T_x)` bool, `states` (the decoder RNN states of every
    layer, bottom layer first, a tuple) and `attention` `(batch, T_x)`: the alignment computed
    by the last step. A model of any depth is driven alike: each encoder layer's final states
    pass through their bridge to the decoder layer of the same depth.

    Args:
        model: a model returned by `keras_attn.models.rnn_attention_translator` (or loaded from
            its `.keras` file).
        pad_id: the source padding id (0).
    """

    def __init__(self, model: keras.Model, pad_id: int = 0):
        self.model = model
        self.pad_id = pad_id
        self.source_embedding = model.get_layer(names.SOURCE_EMBEDDING)
        self.encoder = model.get_layer(names.ENCODER)
        self.bridges = [
            model.get_layer(names.BRIDGE.format(index)) for index in range(self.encoder.num_states)
        ]
        self.target_embedding = model.get_layer(names.TARGET_EMBEDDING)
        self.decoder = model.get_layer(names.DECODER)
        self.output_projection = model.get_layer(names.OUTPUT_PROJECTION)

    def _run_encoder(self, source_ids):
        """`(memory, memory_mask, encoder final states, decoder initial states)` of a batch."""
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        memory_mask = ops.not_equal(source_ids, self.pad_id)
        embedded = self.source_embedding(source_ids)
        memory, *final_states = self.encoder(embedded, mask=memory_mask, training=False)
        states = tuple(
            bridge(state) for bridge, state in zip(self.bridges, final_states, strict=True)
        )
        return memory, memory_mask, final_states, states

    def encode(self, source_ids) -> dict:
        memory, memory_mask, _, states = self._run_encoder(source_ids)
        return {
            "memory": memory,
            "prepared_memory": self.decoder.prepare_memory(memory),
            "memory_mask": memory_mask,
            "states": states,
            "attention": ops.zeros(ops.shape(memory_mask), dtype="float32"),
        }

    def step(self, token_ids, state: dict):
        embedded = self.target_embedding(token_ids)  # (batch, d_y)
        output, attention, states = self.decoder.step(
            embedded,
            list(state["states"]),
            state["memory"],
            state["prepared_memory"],
            state["memory_mask"],
            training=False,
        )
        logits = self.output_projection(output)
        new_state = dict(state)
        new_state["states"] = tuple(states)
        new_state["attention"] = ops.cast(attention, "float32")
        return ops.cast(logits, "float32"), new_state
