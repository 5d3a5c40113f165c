"""The options of the `cnn-rnn` family: `cnn_translator`'s keyword arguments, with its defaults.

This module imports neither TensorFlow nor Keras: `keras-attn train` reads it to build its flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from keras_attn.options import option_field

ACTIVATIONS = ("glu", "relu")
POSITIONS = ("learned", "sinusoidal")
CELLS = ("lstm", "gru")


@dataclass(frozen=True)
class CNNTranslatorOptions:
    """The hyperparameters of the `cnn-rnn` family: `cnn_translator`'s keyword arguments."""

    embedding_dim: int = option_field(128, "width of the source and target embeddings", min=1)
    units: int = option_field(256, "width of the convolutions, the memory and the decoder", min=1)
    kernel_width: int = option_field(3, "width of each convolution", min=1)
    num_layers: int = option_field(4, "convolution blocks of the encoder", min=1)
    activation: str = option_field("glu", "the convolutions' activation", choices=ACTIVATIONS)
    positions: str = option_field("learned", "position vectors of the encoder", choices=POSITIONS)
    max_positions: int = option_field(512, "positions a learned table holds", min=1)
    cell: str = option_field("lstm", "the decoder's recurrent cell", choices=CELLS)
    decoder_layers: int = option_field(1, "stacked decoder layers", min=1)
    dropout: float = option_field(0.1, "dropout on embeddings, convolutions and outputs", min=0.0)


# The built-in families of this folder and their options (`keras_attn.models.family_options`
# collects these tables).
FAMILY_OPTIONS = {
    "cnn-rnn": CNNTranslatorOptions,
}
