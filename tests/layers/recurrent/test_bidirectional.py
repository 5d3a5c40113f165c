"""`bidirectional`: keras' Bidirectional built with load_model's object-sharing maps set aside."""

import keras
import numpy as np
import pytest
from keras.src.backend.common import global_state
from keras.src.saving.serialization_lib import ObjectSharingScope

from keras_attn._private import _SHARING_MAPS
from keras_attn.layers import BidirectionalEncoder, DeepRNN
from keras_attn.layers.recurrent._bidirectional import bidirectional


def _maps():
    return [global_state.get_global_attribute(name) for name in _SHARING_MAPS]


def test_a_reused_address_does_not_hand_over_an_earlier_layer():
    # What load_model meets when a freed template's address is taken by the next template:
    # the maps already hold that id, mapped to a layer built earlier. keras.layers.Bidirectional
    # called here directly takes `earlier` as both copies and raises (go_backwards equal).
    template = keras.layers.GRU(3, return_sequences=True)
    earlier = keras.layers.GRU(3, return_sequences=True, name="earlier")
    with ObjectSharingScope():
        id_to_obj, id_to_config = _maps()
        id_to_config[id(template)] = {}
        id_to_obj[id(template)] = earlier
        wrapper = bidirectional(template, merge_mode="sum")
        assert _maps() == [{id(template): earlier}, {id(template): {}}]
        assert _maps()[0] is id_to_obj and _maps()[1] is id_to_config
    assert wrapper.forward_layer is not earlier and wrapper.backward_layer is not earlier
    assert wrapper.forward_layer is not wrapper.backward_layer
    assert (wrapper.forward_layer.go_backwards, wrapper.backward_layer.go_backwards) == (
        False,
        True,
    )
    assert wrapper.merge_mode == "sum"


def test_maps_are_put_back_when_the_wrapper_refuses_its_arguments():
    with ObjectSharingScope():
        before = _maps()
        with pytest.raises(ValueError, match="merge mode"):
            bidirectional(keras.layers.GRU(3), merge_mode="max")
        assert _maps()[0] is before[0] and _maps()[1] is before[1]
    assert _maps() == [None, None]


@pytest.mark.parametrize(
    "build",
    [
        lambda: BidirectionalEncoder(3, cell="gru"),
        lambda: DeepRNN(3, num_layers=3, cell="gru", bidirectional=True).build((None, 5, 4)),
    ],
    ids=["BidirectionalEncoder", "DeepRNN"],
)
def test_library_layers_leave_the_sharing_maps_untouched(build):
    # With keras.layers.Bidirectional called directly, each wrapper recorded its template's
    # id in both maps: the entries a later template at the same address would collide with.
    with ObjectSharingScope():
        build()
        assert _maps() == [{}, {}]


def test_three_encoders_round_trip_through_a_keras_file(tmp_path):
    inputs = keras.Input((5, 4))
    sequence = inputs
    for _ in range(3):
        sequence = BidirectionalEncoder(3, cell="gru")(sequence)[0]
    model = keras.Model(inputs, sequence)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    weights = [w for layer in loaded.layers for w in layer.weights]
    assert len({id(w) for w in weights}) == len(weights) == len(model.weights)
    x = np.random.default_rng(0).normal(size=(2, 5, 4)).astype("float32")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(x)),
        keras.ops.convert_to_numpy(model(x)),
        rtol=1e-6,
        atol=1e-6,
    )
