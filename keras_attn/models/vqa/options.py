"""The options of `vqa-coattention`: the visual question answerer's (the keyword arguments of
`vqa_coattention`, with its defaults).

This module imports neither TensorFlow nor Keras: `keras-attn train` reads it to build its flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from keras_attn.options import option_field


@dataclass(frozen=True)
class VQACoAttentionOptions:
    """The options of a parallel co-attention answerer (Lu et al., 2016)."""

    embedding_dim: int = option_field(32, "width of the question's word embeddings", above=0)
    units: int = option_field(
        64, "width of the region and question features (and of the joint layer)", above=0
    )
    attention_units: int = option_field(32, "width k of the co-attention maps H^v and H^q", above=0)
    dropout: float = option_field(0.1, "dropout on the joint features", min=0, below=1)


# The built-in families of this folder and their options (`keras_attn.models.family_options`
# collects these tables).
FAMILY_OPTIONS = {
    "vqa-coattention": VQACoAttentionOptions,
}
