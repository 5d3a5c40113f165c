"""The step-contract view of a model built by `rnn_luong_translator`."""

from __future__ import annotations

from keras_attn.api_export import keras_attn_export
from keras_attn.models.rnn_translator_steps import RNNTranslatorSteps


@keras_attn_export("keras_attn.models.LuongTranslatorSteps")
class LuongTranslatorSteps(RNNTranslatorSteps):
    """`encode` and `step` over the layers of a trained Luong translator.

    As `RNNTranslatorSteps` (same layer names, same state dict, dropout off); the decoder states
    in `state["states"]` are those `LuongDecoder.step` carries: every layer's `[h, c]` (or
    `[h]`) from the bridges, bottom layer first, then `h~_0 = 0` with input feeding and the step
    index with local-m. `step` returns the logits `W_s h~_t` and `state["attention"]`, the
    alignment of the step.

    Args:
        model: a model returned by `keras_attn.models.rnn_luong_translator` (or loaded from its
            `.keras` file).
        pad_id: the source padding id (0).
    """

    def encode(self, source_ids) -> dict:
        state = super().encode(source_ids)
        state["states"] = tuple(self.decoder.initial_step_states(list(state["states"])))
        return state
