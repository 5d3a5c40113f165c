"""`keras.layers.Bidirectional` built outside Keras' object-sharing scope (not public)."""

from __future__ import annotations

import keras

from keras_attn._private import object_sharing_paused


def bidirectional(layer: keras.layers.Layer, **kwargs) -> keras.layers.Bidirectional:
    """`keras.layers.Bidirectional(layer, **kwargs)`, with object sharing paused meanwhile.

    `Bidirectional.__init__` serializes `layer` twice and deserializes both configs to make its
    forward and backward copies. Inside a sharing scope (while `load_model` rebuilds a model
    whose layers build a `Bidirectional`), Keras records each serialized object by `id()`: the
    second serialization of `layer` is marked as shared and its deserialization may return an
    object recorded earlier under the same id. `layer` is a temporary, so once it is freed the
    next layer's template can get the same address, and the copies of a later `Bidirectional`
    are then taken from an earlier one: loading fails with "Forward layer and backward layer
    should have different `go_backwards` value", or, worse, two layers share one RNN. Whether
    it happens depends on where the allocator puts the templates, so it is intermittent.
    The copies need no sharing, so the maps are set aside while the wrapper is built and put
    back afterwards (also on error).
    """
    with object_sharing_paused():
        return keras.layers.Bidirectional(layer, **kwargs)
