"""The step-contract view of a model built by `show_attend_tell`."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.models.rnn.steps import RNNTranslatorSteps


@keras_attn_export("keras_attn.models.ShowAttendTellSteps")
def ShowAttendTellSteps(model: keras.Model, training: bool = False) -> RNNTranslatorSteps:
    """The `RNNTranslatorSteps` view of a Show, Attend and Tell captioner.

    - `encode(images (batch, H, W, 3) uint8, training=None) -> state`
    - `step(token_ids (batch,), state, training=None) -> (logits (batch, V) float32, state)`

    The state holds `features` `(batch, L, D)`, `prepared_features`, `states` (`(h, c)` of the
    LSTM) and `attention` `(batch, L)` float32, the region weights of the last step (zeros after
    `encode`); `grid_shape` is `(H', W')`. `keras_attn.decoding.greedy_search` and `beam_search`
    run on it and collect the attention of every step into their alignments. With
    `training=False` dropout is off and hard attention takes the most probable region.

    Args:
        model: a model returned by `keras_attn.models.show_attend_tell` (or loaded from its
            `.keras` file).
        training: run the layers in training mode unless a call says otherwise.

    Returns:
        An `RNNTranslatorSteps` over `model`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import show_attend_tell
    >>> model = show_attend_tell(12, 16, embedding_dim=4, units=8, encoder_filters=(4, 4))
    >>> steps = ShowAttendTellSteps(model)
    >>> state = steps.encode(np.zeros((2, 16, 16, 3), "uint8"))
    >>> logits, state = steps.step(np.array([1, 1]), state)
    >>> tuple(logits.shape), tuple(state["attention"].shape), steps.grid_shape
    ((2, 12), (2, 16), (4, 4))

    References:
        Xu et al., 2015, "Show, Attend and Tell", arXiv:1502.03044.
    """
    return RNNTranslatorSteps(model, training=training)
