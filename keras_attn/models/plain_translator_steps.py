"""The step-contract view of a model built by `rnn_plain_translator`."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.models.rnn_translator_steps import RNNTranslatorSteps


@keras_attn_export("keras_attn.models.PlainTranslatorSteps")
class PlainTranslatorSteps(RNNTranslatorSteps):
    """`encode` and `step` over the layers of a trained attention-free translator.

    Same layer names as `RNNTranslatorSteps`, dropout off. The state is a dict: `context` `c`
    `(batch, units)` (the final hidden states of the encoder's top layer), `states` (the decoder
    RNN states of every layer, bottom layer first, a tuple) and `attention` `(batch, T_x)`
    float32, which stays all zeros: the decoder attends to no source position, so the exported
    `translate_with_alignment` returns an all-zero `alignment` `[batch, L, T_x]` — the
    contract's shapes hold and no target token claims a source word. (A saliency or
    forced-alignment estimate would be a different quantity from the attention weights the
    other families return, so none is substituted.)

    Args:
        model: a model returned by `keras_attn.models.rnn_plain_translator` (or loaded from its
            `.keras` file).
        pad_id: the source padding id (0).
    """

    def encode(self, source_ids) -> dict:
        _, memory_mask, final_states, states = self._run_encoder(source_ids)
        top_hidden = self.encoder.num_states - self.encoder.states_per_layer
        return {
            "context": final_states[top_hidden],
            "states": states,
            "attention": ops.zeros(ops.shape(memory_mask), dtype="float32"),
        }

    def step(self, token_ids, state: dict):
        embedded = self.target_embedding(token_ids)  # (batch, d_y)
        output, states = self.decoder.step(
            embedded, list(state["states"]), state["context"], training=False
        )
        new_state = dict(state)
        new_state["states"] = tuple(states)
        return ops.cast(self.output_projection(output), "float32"), new_state
