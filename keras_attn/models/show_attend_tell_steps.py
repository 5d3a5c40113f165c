"""The step-contract view of a model built by `show_attend_tell`."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.models.show_attend_tell import (
    ATTENTION,
    DECODER,
    EMBEDDING,
    ENCODER,
    OUTPUT_PROJECTION,
)


@keras_attn_export("keras_attn.models.show_attend_tell_steps.ShowAttendTellSteps")
class ShowAttendTellSteps:
    """`encode` and `step` functions over the layers of a Show, Attend and Tell captioner.

    They reuse the model's own layers (looked up by name, so a `.keras` reload works), hence the
    exact weights that teacher-forced training used; dropout is off and hard attention takes the
    most probable region.

    - `encode(images (batch, H, W, 3) uint8) -> state`
    - `step(token_ids (batch,), state) -> (logits (batch, V) float32, state)`

    The state is a dict: `features` `(batch, L, D)`, `prepared_features` (the region-only part
    of the attention score), `states` (`(h, c)` of the LSTM) and `attention` `(batch, L)`
    float32: the region weights of the last step (zeros after `encode`). `L = H' W'` in
    row-major order; `grid_shape` is `(H', W')`. `keras_attn.decoding.greedy_search` and
    `beam_search` run on it and collect the attention of every step into their alignments.

    Args:
        model: a model returned by `keras_attn.models.show_attend_tell.show_attend_tell` (or
            loaded from its `.keras` file).

    Example:

    >>> import numpy as np
    >>> from keras_attn.models.show_attend_tell import show_attend_tell
    >>> model = show_attend_tell(12, 16, embedding_dim=4, units=8, encoder_filters=(4, 4))
    >>> steps = ShowAttendTellSteps(model)
    >>> state = steps.encode(np.zeros((2, 16, 16, 3), "uint8"))
    >>> logits, state = steps.step(np.array([1, 1]), state)
    >>> tuple(logits.shape), tuple(state["attention"].shape), steps.grid_shape
    ((2, 12), (2, 16), (4, 4))

    References:
        Xu et al., 2015, "Show, Attend and Tell", arXiv:1502.03044.
    """

    def __init__(self, model: keras.Model):
        self.model = model
        self.encoder = model.get_layer(ENCODER)
        self.embedding = model.get_layer(EMBEDDING)
        self.decoder = model.get_layer(DECODER)
        self.output_projection = model.get_layer(OUTPUT_PROJECTION)
        self.grid_shape = tuple(model.get_layer(ATTENTION).target_shape[1:])

    def encode(self, images) -> dict:
        features = self.encoder(ops.convert_to_tensor(images, "uint8"), training=False)
        features = ops.cast(features, self.decoder.compute_dtype)
        return {
            "features": features,
            "prepared_features": self.decoder.prepare_features(features),
            "states": tuple(self.decoder.initial_state(features)),
            "attention": ops.zeros(ops.shape(features)[:2], dtype="float32"),
        }

    def step(self, token_ids, state: dict):
        embedded = self.embedding(ops.convert_to_tensor(token_ids, "int32"))  # (batch, m)
        output, weights, _, states = self.decoder.step(
            ops.cast(embedded, self.decoder.compute_dtype),
            list(state["states"]),
            state["features"],
            state["prepared_features"],
            training=False,
        )
        logits = self.output_projection(output)
        new_state = dict(state)
        new_state["states"] = tuple(states)
        new_state["attention"] = ops.cast(weights, "float32")
        return ops.cast(logits, "float32"), new_state
