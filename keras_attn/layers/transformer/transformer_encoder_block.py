"""One Transformer encoder layer: multi-head self-attention and a feed-forward network."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.transformer._base import TransformerLayer


@keras_attn_export("keras_attn.layers.TransformerEncoderBlock")
class TransformerEncoderBlock(TransformerLayer):
    """Transformer encoder layer (Vaswani et al., 2017, section 3.1).

    Post-LN, as in the paper (`normalize_first=False`, default), for `X` `(batch, T, d)`:

        mha_1  = MHA(X, X, X)                       (batch, T, d), padded keys get 0 weight
        norm_1 = LN(X + Dropout(mha_1))
        f      = FFN(norm_1)                        act(norm_1 W_1 + b_1) W_2 + b_2
        out    = LN(norm_1 + Dropout(f))            (batch, T, d)

    Pre-LN (`normalize_first=True`, Xiong et al. 2020; GPT-2 and most recent models):

        h   = X + Dropout(MHA(LN(X), LN(X), LN(X)))
        out = h + Dropout(FFN(LN(h)))

    A pre-LN stack needs a final LayerNorm after its last block (`TransformerEncoder` adds it).
    MHA has `num_heads` heads of size `d / num_heads` (`d_k = d_v = d_model / h`).

    Args:
        num_heads: attention heads `h`; must divide `d`.
        intermediate_dim: width of the feed-forward hidden layer (`d_ff`).
        dropout: residual dropout on each sublayer's output (`P_drop` of the paper).
        attention_dropout: dropout on the attention weights.
        activation: feed-forward activation (`"relu"` as in the paper, `"gelu"` for BERT).
        normalize_first: pre-LN instead of post-LN.
        layer_norm_epsilon: epsilon of the LayerNorms.
        kernel_initializer: initializer of every kernel.
        bias_initializer: initializer of every bias.

    Call arguments:
        inputs: `(batch, T, d)`.
        inputs_mask: bool `(batch, T)`, True at real positions: padded positions get exactly zero
            attention weight. Filled from Keras masking when not given (Keras passes the mask as
            `inputs_mask`, or as `mask` when `inputs` is the only tensor argument; both work).
        attention_mask: bool `(batch, T, T)`, True where attention is allowed.
        mask: the Keras mask of `inputs` (see `inputs_mask`).
        training: enables dropout.
        return_attention_scores: also return the self-attention weights. Without them the
            attention may take its fused path (see `MultiHeadAttention`).

    Returns:
        `(batch, T, d)`, or `(outputs, weights)` with `weights` `(batch, heads, T, T)` when
        `return_attention_scores=True`. The Keras mask of `inputs` passes on.

    Example:

    >>> import numpy as np
    >>> block = TransformerEncoderBlock(num_heads=2, intermediate_dim=16)
    >>> x = np.random.rand(2, 5, 8).astype("float32")
    >>> mask = np.array([[True] * 5, [True, True, True, False, False]])
    >>> y, weights = block(x, inputs_mask=mask, return_attention_scores=True)
    >>> tuple(y.shape), tuple(weights.shape), float(np.abs(weights[1, :, :, 3:]).max())
    ((2, 5, 8), (2, 2, 5, 5), 0.0)

    References:
        Vaswani et al., 2017, "Attention Is All You Need", arXiv:1706.03762.
        Xiong et al., 2020, "On Layer Normalization in the Transformer Architecture",
        arXiv:2002.04745.
    """

    def build(self, inputs_shape):
        self._check_model_dim(inputs_shape)
        self.self_attention = self._attention("self_attention", inputs_shape, inputs_shape)
        self.self_attention_norm = self._layer_norm("self_attention_norm", inputs_shape)
        self.feed_forward = self._feed_forward(inputs_shape)
        self.feed_forward_norm = self._layer_norm("feed_forward_norm", inputs_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def call(
        self,
        inputs,
        inputs_mask=None,
        attention_mask=None,
        mask=None,
        training=None,
        return_attention_scores=False,
    ):
        padding = inputs_mask if inputs_mask is not None else mask

        def attend(h):
            outputs = self.self_attention(
                h,
                h,
                query_mask=padding,
                value_mask=padding,
                attention_mask=attention_mask,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            # Without the weights the attention may take its fused path.
            return outputs if return_attention_scores else (outputs, None)

        x, weights = self._sublayer(inputs, attend, self.self_attention_norm, training)
        x = self._feed_forward_sublayer(x, training)
        return (x, weights) if return_attention_scores else x
