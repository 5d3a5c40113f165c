"""The residual + LayerNorm wrapper of every Transformer sublayer, post-LN or pre-LN."""

from __future__ import annotations

from collections.abc import Callable


def residual(x, sublayer: Callable, norm, dropout, normalize_first: bool, training=None):
    """Wrap `sublayer` with a residual connection and a LayerNorm.

    post-LN (Vaswani et al.):  y = LN(x + Dropout(sublayer(x)))
    pre-LN (Xiong et al.):     y = x + Dropout(sublayer(LN(x)))

    `sublayer(h)` returns `(output, extra)`; `extra` (attention weights, a cache) is passed back.
    Returns `(y, extra)`.
    """
    hidden = norm(x) if normalize_first else x
    output, extra = sublayer(hidden)
    y = x + dropout(output, training=training)
    return (y if normalize_first else norm(y)), extra
