"""The hidden state of one token of each sequence: the first ([CLS]) or the last real one."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.mask_passthrough import PooledOutputMask

POSITIONS = ("first", "last")


@keras_attn_export("keras_attn.layers.TokenPooling")
class TokenPooling(PooledOutputMask, keras.layers.Layer):
    """One token's vector per sequence: the first or the last real (non-padding) position.

        inputs h (batch, T, d), mask m (batch, T), True at real positions
        "first": i_b = min {t : m[b, t]}                   (0 for right-padded rows: [CLS])
        "last":  i_b = max {t : m[b, t]}                   (the last real token: GPT's extract)
        output[b] = h[b, i_b]                              (batch, d)

    Without a mask every position is real: `"first"` gives `h[:, 0]`, `"last"` gives `h[:, -1]`.
    A row without any real position gives a zero vector. BERT classifies the output at its first
    token, [CLS] (Devlin et al., 2018, section 3); GPT classifies the output at the last token of
    the input (Radford et al., 2018, section 3.2), which for right-padded batches sits at a
    different position in each row.

    Args:
        position: `"first"` or `"last"`.

    Call arguments:
        inputs: `(batch, T, d)`.
        mask: bool `(batch, T)`, True at real positions; filled from Keras masking (e.g. by an
            embedding with `mask_zero=True` on ids right-padded with 0).

    Returns:
        `(batch, d)` in the input's dtype. The output carries no mask.

    Example:

    >>> import numpy as np
    >>> h = np.arange(12, dtype="float32").reshape(2, 3, 2)
    >>> mask = np.array([[True, True, True], [True, False, False]])
    >>> ops.convert_to_numpy(TokenPooling("last")(h, mask=mask)).tolist()
    [[4.0, 5.0], [6.0, 7.0]]
    >>> ops.convert_to_numpy(TokenPooling("first")(h)).tolist()
    [[0.0, 1.0], [6.0, 7.0]]

    References:
        Devlin et al., 2018, "BERT: Pre-training of Deep Bidirectional Transformers for Language
        Understanding", arXiv:1810.04805.
        Radford et al., 2018, "Improving Language Understanding by Generative Pre-Training".
    """

    def __init__(self, position: str = "first", **kwargs):
        super().__init__(**kwargs)
        if position not in POSITIONS:
            raise ValueError(
                f"Expected position in {set(POSITIONS)}. Received: position={position!r}"
            )
        self.position = position
        self.supports_masking = True

    def call(self, inputs, mask=None):
        length = ops.shape(inputs)[1]
        if mask is None:
            index = ops.zeros_like(inputs[:, 0, 0], dtype="int32")
            if self.position == "last":
                index = index + length - 1
            return self._take(inputs, index)
        mask = ops.cast(mask, "bool")
        positions = ops.arange(length, dtype="int32")[None, :]  # (1, T)
        if self.position == "first":
            index = ops.min(ops.where(mask, positions, length), axis=1)  # (batch,), T if none
        else:
            index = ops.max(ops.where(mask, positions, -1), axis=1)  # (batch,), -1 if none
        pooled = self._take(inputs, ops.clip(index, 0, length - 1))
        has_real = ops.any(mask, axis=1)[:, None]  # (batch, 1)
        return ops.where(has_real, pooled, ops.zeros_like(pooled))

    @staticmethod
    def _take(inputs, index):
        """`inputs[b, index[b]]` `(batch, d)` for int32 `index` `(batch,)`."""
        gathered = ops.take_along_axis(inputs, ops.reshape(index, (-1, 1, 1)), axis=1)
        return gathered[:, 0]  # (batch, 1, d) -> (batch, d)

    def compute_output_shape(self, inputs_shape):
        return (inputs_shape[0], inputs_shape[2])

    def get_config(self):
        config = super().get_config()
        config.update(position=self.position)
        return config
