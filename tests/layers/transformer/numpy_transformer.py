"""Float64 NumPy references of the Transformer sublayers and blocks, read off a layer's weights.

Written from the equations of Vaswani et al., 2017 (sections 3.1-3.5; pre-LN as in Xiong et al.,
2020), independently of the Keras code: only the weights are taken from the layers.
"""

from __future__ import annotations

import math

import keras
import numpy as np

from tests import numpy_reference as ref

_erf = np.vectorize(math.erf)

ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
}


def randomise(layer, seed: int = 0, scale: float = 0.3) -> None:
    """Non-trivial values for every weight: LayerNorm scales near 1, everything else N(0, scale)."""
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        values = rng.normal(scale=scale, size=weight.shape)
        if weight.path.endswith("gamma"):
            values = 1.0 + 0.2 * values
        weight.assign(values.astype("float32"))


def _w(variable) -> np.ndarray:
    return np.asarray(keras.ops.convert_to_numpy(variable), "float64")


def layer_norm(norm, x):
    """LN(x) = gamma * (x - mean) / sqrt(var + epsilon) + beta over the last axis."""
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return _w(norm.gamma) * (x - mean) / np.sqrt(var + norm.epsilon) + _w(norm.beta)


def multi_head_attention(layer, query, value, mask=None, query_mask=None):
    """Multi-head attention (with `V_i = E_V W_i^V`): returns `(output, weights)`.

    `mask` is bool `(batch, T_q, T_k)`; rows of padded queries (`query_mask` False) are zeroed.
    """
    q = np.einsum("btd,dhe->bhte", query, _w(layer.query_kernel)) + _w(layer.query_bias)[:, None]
    k = np.einsum("btd,dhe->bhte", value, _w(layer.key_kernel)) + _w(layer.key_bias)[:, None]
    v = np.einsum("btd,dhe->bhte", value, _w(layer.value_kernel)) + _w(layer.value_bias)[:, None]
    scores = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(layer.key_dim)
    weights = ref.softmax(scores, None if mask is None else mask[:, None])
    heads = np.einsum("bhqk,bhke->bqhe", weights, v)
    output = np.einsum("bqhe,heo->bqo", heads, _w(layer.output_kernel)) + _w(layer.output_bias)
    if query_mask is not None:
        output = output * query_mask[..., None]
    return output, weights


def feed_forward(layer, x):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2."""
    act = ACTIVATIONS[keras.activations.serialize(layer.activation)]
    hidden = act(x @ _w(layer.hidden_dense.kernel) + _w(layer.hidden_dense.bias))
    return hidden @ _w(layer.output_dense.kernel) + _w(layer.output_dense.bias)


def _sublayer(x, fn, norm, normalize_first):
    """post-LN: LN(x + f(x)); pre-LN: x + f(LN(x)) (dropout off)."""
    if normalize_first:
        output, extra = fn(layer_norm(norm, x))
        return x + output, extra
    output, extra = fn(x)
    return layer_norm(norm, x + output), extra


def encoder_block(block, x, padding=None):
    """Encoder layer: self-attention + FFN, each with residual and LayerNorm."""
    batch, length = x.shape[:2]
    padding = np.ones((batch, length), bool) if padding is None else padding
    mask = np.broadcast_to(padding[:, None, :], (batch, length, length))
    x, weights = _sublayer(
        x,
        lambda h: multi_head_attention(block.self_attention, h, h, mask, padding),
        block.self_attention_norm,
        block.normalize_first,
    )
    x, _ = _sublayer(
        x,
        lambda h: (feed_forward(block.feed_forward, h), None),
        block.feed_forward_norm,
        block.normalize_first,
    )
    return x, weights


def decoder_block(block, x, memory=None, padding=None, memory_mask=None):
    """Decoder layer: causal self-attention, cross-attention (query = decoder, keys and
    values = memory, residual = norm_1), FFN. Returns `(output, self_weights, cross_weights)`."""
    batch, length = x.shape[:2]
    padding = np.ones((batch, length), bool) if padding is None else padding
    causal = np.tril(np.ones((length, length), bool))
    mask = padding[:, None, :] & causal[None]
    x, self_weights = _sublayer(
        x,
        lambda h: multi_head_attention(block.self_attention, h, h, mask, padding),
        block.self_attention_norm,
        block.normalize_first,
    )
    cross_weights = None
    if memory is not None:
        memory_mask = np.ones(memory.shape[:2], bool) if memory_mask is None else memory_mask
        cross_mask = np.broadcast_to(memory_mask[:, None, :], (batch, length, memory.shape[1]))
        x, cross_weights = _sublayer(
            x,
            lambda h: multi_head_attention(
                block.cross_attention_layer, h, memory, cross_mask, padding
            ),
            block.cross_attention_norm,
            block.normalize_first,
        )
    x, _ = _sublayer(
        x,
        lambda h: (feed_forward(block.feed_forward, h), None),
        block.feed_forward_norm,
        block.normalize_first,
    )
    return x, self_weights, cross_weights
