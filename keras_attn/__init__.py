"""keras_attn: recurrent, attention and Transformer layers for Keras 3, exportable to TF Serving.

Every subpackage is an attribute (`keras_attn.layers`, `keras_attn.serving`, ...), imported the
first time it is used, so `import keras_attn` itself imports neither Keras nor TensorFlow and the
`keras-attn` command checks its arguments at once. Every keras_attn layer, score and model object
is registered for Keras serialization as soon as Keras is imported, so `keras.saving.load_model`
reads a model made of them after a plain `import keras_attn`.
"""

import importlib

import wrapt

from keras_attn import _serializables

__version__ = "0.1.0"

__all__ = [
    "decoding",
    "distributions",
    "export",
    "layers",
    "models",
    "ops",
    "scores",
    "serving",
    "testing",
    "text",
    "training",
    "vision",
]


def __getattr__(name: str):
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


wrapt.register_post_import_hook(_serializables.register, "keras")
