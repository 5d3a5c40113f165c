"""The options of `text-cnn`: the convolutional sentence classifier's (keyword arguments of
`text_cnn`, with its defaults).

This module imports neither TensorFlow nor Keras: `keras-attn train` reads it to build its flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from keras_attn.options import option_field


@dataclass(frozen=True)
class TextCNNOptions:
    """The options of a convolutional sentence classifier (Kim, 2014)."""

    embedding_dim: int = option_field(300, "width of the word embeddings", above=0)
    dropout: float = option_field(0.5, "dropout on the pooled features", min=0, below=1)


# The built-in families of this folder and their options (`keras_attn.models.family_options`
# collects these tables).
FAMILY_OPTIONS = {
    "text-cnn": TextCNNOptions,
}
