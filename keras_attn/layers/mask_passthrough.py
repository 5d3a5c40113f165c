"""The Keras mask rule shared by layers whose output keeps the positions of their first input."""

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
