"""The options of the Transformer families: those every Transformer backbone takes, and the
`transformer` translator's (the keyword arguments of their builders, with the builders'
defaults).

This module imports neither TensorFlow nor Keras: `keras-attn train` reads it to build its flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from keras_attn.errors import ConfigError
from keras_attn.options import option_field


@dataclass(frozen=True)
class TransformerOptions:
    """The options of a Transformer stack (Vaswani et al., 2017): depth, widths, dropout."""

    num_layers: int = option_field(2, "Transformer blocks per stack", above=0)
    d_model: int = option_field(
        128, "model width: embeddings and every block's input and output", above=0
    )
    num_heads: int = option_field(4, "attention heads of each block", above=0)
    ff_dim: int = option_field(512, "inner width of each block's feed-forward layer", above=0)
    dropout: float = option_field(0.1, "dropout rate", min=0, below=1)

    def validate(self) -> None:
        """Refuse a width the heads do not divide."""
        if self.d_model % self.num_heads:
            raise ConfigError(
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads} "
                "(each head gets an equal share of the width)",
                ["d_model", "num_heads"],
            )


@dataclass(frozen=True)
class TransformerTranslatorOptions(TransformerOptions):
    """The options of `transformer`: an encoder-decoder translator."""

    normalize_first: bool = option_field(
        False, "pre-LN blocks (layer normalization before each sublayer) instead of post-LN"
    )


# The built-in families of this folder and their options (`keras_attn.models.family_options`
# collects these tables).
FAMILY_OPTIONS = {
    "transformer": TransformerTranslatorOptions,
}
