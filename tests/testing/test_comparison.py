import keras
import numpy as np
import pytest

from keras_attn.testing.comparison import (
    describe,
    equivalent,
    flat,
    is_plain,
    json_normalise,
    plain_equal,
    shapes_compatible,
)

pytestmark = pytest.mark.every_backend


def test_flat_and_describe_follow_the_nesting():
    structure = (np.zeros(1), [np.ones(2), {"a": np.ones(3)}])
    assert [x.shape for x in flat(structure)] == [(1,), (2,), (3,)]
    assert describe(structure) == [None, [None, {"a": None}]]
    assert describe((np.zeros(1), np.zeros(1))) == describe([np.zeros(1), np.zeros(1)])


def test_shapes_compatible_treats_none_as_any_size():
    assert shapes_compatible((None, 3, 4), (2, 3, 4))
    assert not shapes_compatible((None, 3, 4), (2, 3, 5))
    assert not shapes_compatible((2, 3), (2, 3, 1))


def test_plain_values():
    assert is_plain({"units": 4, "pair": (1, 2.0), "name": None, "flag": np.bool_(True)})
    assert not is_plain({"initializer": keras.initializers.Zeros()})
    assert not is_plain({1: "key is not a string"})
    assert plain_equal((1, [2, 3]), [1, (2, 3)])
    assert not plain_equal(True, 1)
    assert plain_equal(np.float32(0.5), 0.5)
    assert json_normalise({"a": (1, 2)}) == {"a": [1, 2]}
    with pytest.raises(TypeError):
        json_normalise({"a": object()})


def test_equivalent_accepts_resolved_identifiers_and_compares_objects_serialized():
    assert equivalent("glorot_uniform", keras.initializers.GlorotUniform())
    assert equivalent("dot", "dot")
    assert not equivalent("dot", "general")
    assert not equivalent("dot", None)
    assert equivalent(keras.initializers.Constant(2.0), keras.initializers.Constant(2.0))
    assert not equivalent(keras.initializers.Constant(2.0), keras.initializers.Constant(3.0))
