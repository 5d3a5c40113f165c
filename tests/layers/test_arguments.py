"""The argument helpers shared by the layers: choices and config entries."""

import keras
import pytest

from keras_attn import scores
from keras_attn.layers._arguments import check_choice, serialize_arguments


class _Arguments:
    """Stands for a layer that keeps its constructor arguments as attributes."""

    def __init__(self, **arguments):
        for name, value in arguments.items():
            setattr(self, name, value)


def test_serialize_arguments_serializes_each_kind_as_keras_does():
    initializer = keras.initializers.Constant(0.5)
    score = scores.GeneralScore()
    arguments = _Arguments(
        units=8,
        shape=(2, 3),
        score_name="general",
        score=score,
        activation=keras.activations.get("gelu"),
        output_activation=None,
        kernel_initializer=initializer,
        config={"class_name": "DotScore", "config": {}},
    )

    config = serialize_arguments(arguments, *vars(arguments))

    assert config == {
        "units": 8,
        "shape": (2, 3),
        "score_name": "general",
        "score": keras.saving.serialize_keras_object(score),
        "activation": "gelu",
        "output_activation": None,
        "kernel_initializer": keras.initializers.serialize(initializer),
        "config": {"class_name": "DotScore", "config": {}},
    }
    assert config["kernel_initializer"]["config"] == {"value": 0.5}


@keras.saving.register_keras_serializable(package="test_arguments")
class _HalfActivation:
    """A custom activation object, serialized by Keras through its config."""

    def __call__(self, x):
        return x / 2

    def get_config(self):
        return {}


def test_serialize_arguments_serializes_an_activation_object_as_keras_activations_does():
    arguments = _Arguments(activation=_HalfActivation())
    config = serialize_arguments(arguments, "activation")
    assert config == {"activation": keras.activations.serialize(arguments.activation)}
    assert config["activation"]["registered_name"] == "test_arguments>_HalfActivation"


def test_serialize_arguments_keeps_the_order_of_names():
    arguments = _Arguments(b=1, a=2)
    assert list(serialize_arguments(arguments, "a", "b")) == ["a", "b"]


def test_check_choice_returns_the_value_and_quotes_a_wrong_one():
    assert check_choice("mode", "sum", ("sum", "max")) == "sum"
    with pytest.raises(ValueError, match=r"Expected mode in \['sum', 'max'\]\. Received: mode='x'"):
        check_choice("mode", "x", ("sum", "max"))
