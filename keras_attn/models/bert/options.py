"""The options of the BERT families: `bert`, `bert-classifier`, `bert-tagger` and `bertsum`.

This module imports neither TensorFlow nor Keras: `keras-attn train` reads it to build its flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from keras_attn.models.transformer.options import TransformerOptions
from keras_attn.options import option_field


@dataclass(frozen=True)
class BERTOptions(TransformerOptions):
    """The options of a BERT (Devlin et al., 2019): its encoder stack's."""


@dataclass(frozen=True)
class BertSumOptions(BERTOptions):
    """The options of `bertsum` (Liu and Lapata, 2019): a BERT encoder under a new decoder."""

    decoder_layers: int | None = option_field(
        None, "blocks of the new decoder (default: as many as the encoder, num_layers)", above=0
    )


# The built-in families of this folder and their options (`keras_attn.models.family_options`
# collects these tables).
FAMILY_OPTIONS = {
    "bert": BERTOptions,
    "bertsum": BertSumOptions,
    "bert-classifier": BERTOptions,
    "bert-tagger": BERTOptions,
}
