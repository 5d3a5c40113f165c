"""The step-contract view of the recurrent models: the RNN translators built by
`rnn_attention_translator`, `rnn_luong_translator` and `rnn_plain_translator`, and the Show,
Attend and Tell captioner built by `show_attend_tell`."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.models.rnn import attention as names
from keras_attn.models.show_attend_tell import model as captioner_names

# The dropout layers the RNN translator builders put after each embedding and before the
# output projection (`show_attend_tell` has the output one only).
SOURCE_DROPOUT = "source_dropout"
TARGET_DROPOUT = "target_dropout"
OUTPUT_DROPOUT = "output_dropout"


@keras_attn_export(
    [
        "keras_attn.models.RNNTranslatorSteps",
        "keras_attn.models.LuongTranslatorSteps",
        "keras_attn.models.PlainTranslatorSteps",
    ]
)
class RNNTranslatorSteps:
    """`encode` and `step` functions over the layers of a recurrent encoder–decoder.

    They reuse the model's own layers (looked up by name, so a `.keras` reload works), hence the
    exact weights of teacher-forced training. With `training=False` (decoding) dropout is off and
    hard attention takes the most probable region; with `training=True` every layer runs as in
    `model(..., training=True)`, the model's dropout layers included (those named
    `source_dropout`, `target_dropout` and `output_dropout`, where it has them), so stepping the
    gold target reproduces the teacher-forced training pass (scheduled sampling steps it so).

    - `encode(inputs, training=None) -> state`: `inputs` are the source ids `(batch, T_x)` of a
      translator or the images `(batch, H, W, 3)` uint8 of a captioner.
    - `step(token_ids (batch,), state, training=None) -> (logits (batch, V) float32, state)`

    `training=None` in a call means the view's own `training`. One view serves every recurrent
    family; what differs is the decoder layer the model holds:

    - attention (a decoder with `prepare_memory`, e.g. `BahdanauDecoder`, `LuongDecoder`;
      `rnn-attention`, `rnn-luong`): the state is
      `memory` `(batch, T_x, units)`, `prepared_memory` (the key-only part of the score),
      `memory_mask` `(batch, T_x)` bool, `states` and `attention` `(batch, T_x)` float32, the
      alignment of the last step (zeros after `encode`).
    - attention-free (`PlainDecoder`; `rnn-plain`): `context` `c` `(batch, units)` (the final
      hidden states of the encoder's top layer), `states` and `attention`, which stays all zeros:
      the decoder attends to no source position, so an exported `translate_with_alignment`
      returns an all-zero `alignment` and no target token claims a source word.
    - image regions (`ShowAttendTellDecoder`; `show-attend-tell`): `features` `(batch, L, D)`,
      `prepared_features` (the region-only part of the score), `states` (`(h, c)` of the LSTM)
      and `attention` `(batch, L)` float32, the region weights of the last step. `L = H' W'` in
      row-major order; `grid_shape` is `(H', W')` (None for a translator).

    `states` is a tuple: the decoder's step states (`decoder.initial_step_states` of the
    bridged encoder states: every layer's `[h, c]` or `[h]`, bottom layer first, then what the
    decoder carries besides, e.g. Luong's `h~_0 = 0` with input feeding and the step index with
    local-m). A translator of any depth is driven alike: each encoder layer's final states pass
    through their bridge to the decoder layer of the same depth.

    `LuongTranslatorSteps` and `PlainTranslatorSteps` are other names of this class.

    Args:
        model: a model returned by `keras_attn.models.rnn_attention_translator`,
            `rnn_luong_translator`, `rnn_plain_translator` or `show_attend_tell` (or loaded from
            its `.keras` file).
        pad_id: the source padding id (0).
        training: run the layers in training mode (dropout on) unless a call says otherwise.

    Example:

    >>> import numpy as np
    >>> from keras_attn.decoding import greedy_search
    >>> from keras_attn.models import rnn_luong_translator
    >>> model = rnn_luong_translator(20, 20, embedding_dim=4, units=8)
    >>> steps = RNNTranslatorSteps(model)
    >>> state = steps.encode(np.array([[4, 5, 6]]))
    >>> result = greedy_search(steps.step, state, 1, start_id=2, end_id=3, max_length=5)
    >>> tuple(result.ids.shape), tuple(result.alignments.shape)
    ((1, 5), (1, 5, 3))

    References:
        Bahdanau et al., 2015, arXiv:1409.0473. Luong et al., 2015, arXiv:1508.04025.
        Sutskever et al., 2014, arXiv:1409.3215. Xu et al., 2015, arXiv:1502.03044.
    """

    # A family with this step view trains with scheduled sampling (`keras-attn train
    # --scheduled-sampling`): its `training=True` view steps the gold target as the
    # teacher-forced pass runs.
    supports_scheduled_sampling = True

    def __init__(self, model: keras.Model, pad_id: int = 0, training: bool = False):
        self.model = model
        self.pad_id = pad_id
        self.training = bool(training)
        layer_names = {layer.name for layer in model.layers}

        def optional(name):
            return model.get_layer(name) if name in layer_names else None

        self.encoder = model.get_layer(names.ENCODER)
        self.decoder = model.get_layer(names.DECODER)
        # An attention decoder prepares the source memory for its score once per source.
        self._attends = hasattr(self.decoder, "prepare_memory")
        self.output_dropout = optional(OUTPUT_DROPOUT)
        self.output_projection = model.get_layer(names.OUTPUT_PROJECTION)
        if names.SOURCE_EMBEDDING in layer_names:  # a translator: source ids
            self.source_embedding = model.get_layer(names.SOURCE_EMBEDDING)
            self.source_dropout = optional(SOURCE_DROPOUT)
            self.bridges = [
                model.get_layer(names.BRIDGE.format(index))
                for index in range(self.encoder.num_states)
            ]
            self.target_embedding = model.get_layer(names.TARGET_EMBEDDING)
            self.grid_shape = None
        else:  # a captioner: images
            self.source_embedding = self.source_dropout = None
            self.bridges = []
            self.target_embedding = model.get_layer(captioner_names.EMBEDDING)
            attention_maps = model.get_layer(captioner_names.ATTENTION)
            self.grid_shape = tuple(attention_maps.target_shape[1:])
        self.target_dropout = optional(TARGET_DROPOUT)

    def _training(self, training: bool | None) -> bool:
        return self.training if training is None else bool(training)

    def encode(self, inputs, training: bool | None = None) -> dict:
        """The state before the first step: the encoded source (or image) and the decoder's
        initial states."""
        training = self._training(training)
        if self.source_embedding is None:
            return self._encode_images(inputs, training)
        return self._encode_source(inputs, training)

    def _encode_images(self, images, training: bool) -> dict:
        """Hook: the state of a captioner, from the image regions' annotation vectors."""
        features = self.encoder(ops.convert_to_tensor(images, "uint8"), training=training)
        features = ops.cast(features, self.decoder.compute_dtype)  # (batch, L, D)
        return {
            "features": features,
            "prepared_features": self.decoder.prepare_features(features),
            "states": tuple(self.decoder.initial_state(features)),
            "attention": ops.zeros(ops.shape(features)[:2], dtype="float32"),
        }

    def _encode_source(self, source_ids, training: bool) -> dict:
        """Hook: the state of a translator, from the encoder's memory and final states."""
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        memory_mask = ops.not_equal(source_ids, self.pad_id)  # (batch, T_x)
        embedded = self._dropout(
            self.source_dropout, self.source_embedding(source_ids, training=training), training
        )
        memory, *final_states = self.encoder(embedded, mask=memory_mask, training=training)
        bridged = [
            bridge(state, training=training)
            for bridge, state in zip(self.bridges, final_states, strict=True)
        ]
        if hasattr(self.decoder, "initial_step_states"):  # what the decoder's step carries
            bridged = self.decoder.initial_step_states(bridged)
        state = {
            "states": tuple(bridged),
            "attention": ops.zeros(ops.shape(memory_mask), dtype="float32"),
        }
        if self._attends:
            state.update(
                memory=memory,
                prepared_memory=self.decoder.prepare_memory(memory),
                memory_mask=memory_mask,
            )
        else:  # c: the final hidden states of the encoder's top layer
            state["context"] = final_states[self.encoder.num_states - self.encoder.states_per_layer]
        return state

    def step(self, token_ids, state: dict, training: bool | None = None):
        """`(logits (batch, V) float32, new state)` after feeding `token_ids` `(batch,)`."""
        training = self._training(training)
        token_ids = ops.convert_to_tensor(token_ids, "int32")
        embedded = self._dropout(
            self.target_dropout, self.target_embedding(token_ids, training=training), training
        )  # (batch, d_y)
        output, attention, states = self._decoder_step(embedded, state, training)
        output = self._dropout(self.output_dropout, output, training)
        logits = self.output_projection(output, training=training)
        new_state = dict(state)
        new_state["states"] = tuple(states)
        new_state["attention"] = ops.cast(attention, "float32")
        return ops.cast(logits, "float32"), new_state

    def _decoder_step(self, embedded, state: dict, training: bool) -> tuple:
        """Hook: one decoder step, `(output, attention (batch, T_x or L), states)`."""
        states = list(state["states"])
        if self.source_embedding is None:
            output, weights, _, states = self.decoder.step(
                ops.cast(embedded, self.decoder.compute_dtype),
                states,
                state["features"],
                state["prepared_features"],
                training=training,
            )
            return output, weights, states
        if self._attends:
            return self.decoder.step(
                embedded,
                states,
                state["memory"],
                state["prepared_memory"],
                state["memory_mask"],
                training=training,
            )
        output, states = self.decoder.step(embedded, states, state["context"], training=training)
        return output, state["attention"], states

    @staticmethod
    def _dropout(layer, inputs, training: bool):
        return inputs if layer is None else layer(inputs, training=training)


LuongTranslatorSteps = RNNTranslatorSteps
PlainTranslatorSteps = RNNTranslatorSteps
