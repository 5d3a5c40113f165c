"""The options of `gpt` and `gpt-classifier`: a causal Transformer decoder's.

This module imports neither TensorFlow nor Keras: `keras-attn train` reads it to build its flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from keras_attn.models.transformer.options import TransformerOptions


@dataclass(frozen=True)
class GPTOptions(TransformerOptions):
    """The options of a GPT (Radford et al., 2018): its decoder stack's."""


# The built-in families of this folder and their options (`keras_attn.models.family_options`
# collects these tables).
FAMILY_OPTIONS = {
    "gpt": GPTOptions,
    "gpt-classifier": GPTOptions,
}
