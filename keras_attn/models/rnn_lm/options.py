"""The options of `rnn-lm`: the recurrent language model's (the keyword arguments of `rnn_lm`,
with its defaults).

This module imports neither TensorFlow nor Keras: `keras-attn train` reads it to build its flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from keras_attn.options import option_field

CELLS = ("lstm", "gru")


@dataclass(frozen=True)
class RNNLMOptions:
    """The options of a recurrent language model (Mikolov et al., 2010; Graves, 2013)."""

    embedding_dim: int = option_field(128, "width of the token embedding", above=0)
    units: int = option_field(256, "width of every recurrent layer's state", above=0)
    cell: str = option_field("lstm", "recurrent cell of every layer", choices=CELLS)
    num_layers: int = option_field(2, "stacked recurrent layers", above=0)
    dropout: float = option_field(
        0.1,
        "dropout on the embeddings, between recurrent layers and before the softmax",
        min=0,
        below=1,
    )


# The built-in families of this folder and their options (`keras_attn.models.family_options`
# collects these tables).
FAMILY_OPTIONS = {
    "rnn-lm": RNNLMOptions,
}
