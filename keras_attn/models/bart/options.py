"""The options of the BART families: `bart`, `bart-classifier` and `bart-translator`.

This module imports neither TensorFlow nor Keras: `keras-attn train` reads it to build its flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from keras_attn.models.transformer.options import TransformerOptions
from keras_attn.options import option_field


@dataclass(frozen=True)
class BARTOptions(TransformerOptions):
    """The options of a BART (Lewis et al., 2020): its encoder's and decoder's stacks."""


@dataclass(frozen=True)
class BARTTranslatorOptions(BARTOptions):
    """The options of `bart-translator`: a BART fine-tuned to translate."""

    new_source_encoder_layers: int = option_field(
        0,
        "a new source embedding and encoder of this many blocks in front of the pre-trained "
        "encoder (Lewis et al.'s translation fine-tuning; 0: none)",
        min=0,
    )


# The built-in families of this folder and their options (`keras_attn.models.family_options`
# collects these tables).
FAMILY_OPTIONS = {
    "bart": BARTOptions,
    "bart-translator": BARTTranslatorOptions,
    "bart-classifier": BARTOptions,
    "bart-tagger": BARTOptions,
}
