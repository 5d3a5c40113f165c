"""The options of `show-attend-tell`: the image captioner's (the keyword arguments of
`show_attend_tell`, with its defaults).

This module imports neither TensorFlow nor Keras: `keras-attn train` reads it to build its flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from keras_attn.options import option_field

ATTENTIONS = ("soft", "hard")


@dataclass(frozen=True)
class ShowAttendTellOptions:
    """The options of Show, Attend and Tell (Xu et al., 2015)."""

    attention: str = option_field(
        "soft",
        "soft: the context is the weighted mean of the image regions; hard: one region "
        "sampled from the weights",
        choices=ATTENTIONS,
    )
    embedding_dim: int = option_field(
        64, "width of the word embeddings and of the deep output", above=0
    )
    units: int = option_field(128, "width of the decoder's LSTM state", above=0)
    dropout: float = option_field(0.1, "dropout on the deep output", min=0, below=1)
    penalty: float = option_field(
        1.0,
        "weight lambda of the doubly stochastic attention regulariser (0: off)",
        min=0,
        float32=True,
    )


# The built-in families of this folder and their options (`keras_attn.models.family_options`
# collects these tables).
FAMILY_OPTIONS = {
    "show-attend-tell": ShowAttendTellOptions,
}
