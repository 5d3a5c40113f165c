"""The Keras mask rules shared by layers: the output keeps the positions of the first input and
its mask, or pools the positions away and has no mask."""

from __future__ import annotations


class FirstInputMaskPassthrough:
    """Mixin: the output carries the Keras mask of the layer's first input.

    Keras calls `compute_mask(first_input, previous_mask)` positionally, with the mask of the
    first call argument only (for attention: the query). Layers whose output has the query's
    positions — a context per query — keep that mask, so padded queries stay masked downstream.
    A signature such as `compute_mask(self, query, value, ..., query_mask=None)` would silently
    receive the mask in `value` and drop it; subclasses inherit this one instead. When the output
    is a tuple (e.g. `(context, weights)`), Keras applies the mask to the first element only.
    """

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask


class PooledOutputMask:
    """Mixin: the output pools over the input's positions, so no Keras mask goes on.

    For layers that reduce `(batch, T, ...)` to one vector per sequence (or per query): the
    input's mask is used inside `call` and has no positions to apply to afterwards.
    """

    def compute_mask(self, inputs, mask=None):
        return None
