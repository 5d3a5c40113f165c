"""The configuration check: constructor arguments are kept, `get_config` round trips."""

from __future__ import annotations

import keras

from keras_attn.testing.assertions import fail
from keras_attn.testing.comparison import equivalent, json_normalise
from keras_attn.testing.spec import LayerSpec

__all__ = ["check_config_round_trip"]


def check_config_round_trip(spec: LayerSpec) -> None:
    """Config contract: arguments kept, `get_config` JSON-able and complete, round trips equal.

    Every `init_kwargs` key must be an attribute of the same name and a `get_config()` key whose
    values keep the argument (see `equivalent`); the class must be registered for serialization;
    `from_config(get_config())` and `deserialize_keras_object(serialize_keras_object(layer))`
    (through JSON, without `custom_objects`) must give a layer of the same class and equal config.
    """
    check = "config"
    layer = spec.make()
    config = layer.get_config()
    for key, given in spec.init_kwargs.items():
        if not hasattr(layer, key):
            fail(check, spec, f"constructor argument {key!r} is not kept as an attribute")
        if not equivalent(given, getattr(layer, key)):
            fail(
                check,
                spec,
                f"attribute {key!r} is {getattr(layer, key)!r}, constructed with {given!r}",
            )
        if key not in config:
            fail(check, spec, f"constructor argument {key!r} is missing from get_config()")
        if not equivalent(given, config[key]):
            fail(check, spec, f"config[{key!r}] is {config[key]!r}, constructed with {given!r}")
    try:
        config_json = json_normalise(config)
    except TypeError as error:
        fail(check, spec, f"get_config() is not JSON-serializable: {error}")

    registered_name = keras.saving.get_registered_name(spec.layer_cls)
    if keras.saving.get_registered_object(registered_name) is not spec.layer_cls:
        fail(
            check,
            spec,
            "class is not registered for serialization "
            "(decorate it with keras_attn.api_export.keras_attn_export)",
        )

    revived = spec.layer_cls.from_config(config)
    if type(revived) is not spec.layer_cls:
        fail(check, spec, f"from_config built a {type(revived).__name__}")
    if json_normalise(revived.get_config()) != config_json:
        fail(
            check,
            spec,
            f"from_config(get_config()) changes the config:\n{config_json}\n!=\n"
            f"{json_normalise(revived.get_config())}",
        )

    serialized = json_normalise(keras.saving.serialize_keras_object(layer))
    revived = keras.saving.deserialize_keras_object(serialized)
    if type(revived) is not spec.layer_cls:
        fail(check, spec, f"deserialize_keras_object built a {type(revived).__name__}")
    if json_normalise(revived.get_config()) != config_json:
        fail(check, spec, "serialize/deserialize_keras_object changes the config")
