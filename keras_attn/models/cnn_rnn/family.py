"""The `cnn-rnn` family: `cnn_translator`'s options, and the family registered under that name."""

from __future__ import annotations

import dataclasses

from keras_attn.models.cnn_rnn.model import ACTIVATIONS, CELLS, POSITIONS, cnn_translator
from keras_attn.models.family import Family, register_family
from keras_attn.models.rnn.steps import RNNTranslatorSteps


def _option(default, text: str, **metadata) -> dataclasses.Field:
    return dataclasses.field(default=default, metadata={"help": text, **metadata})


@dataclasses.dataclass(frozen=True)
class CNNTranslatorOptions:
    """The hyperparameters of the `cnn-rnn` family: `cnn_translator`'s keyword arguments."""

    embedding_dim: int = _option(128, "width of the source and target embeddings", min=1)
    units: int = _option(256, "width of the convolutions, the memory and the decoder", min=1)
    kernel_width: int = _option(3, "width of each convolution", min=1)
    num_layers: int = _option(4, "convolution blocks of the encoder", min=1)
    activation: str = _option("glu", "the convolutions' activation", choices=ACTIVATIONS)
    positions: str = _option("learned", "position vectors of the encoder", choices=POSITIONS)
    max_positions: int = _option(512, "positions a learned table holds", min=1)
    cell: str = _option("lstm", "the decoder's recurrent cell", choices=CELLS)
    decoder_layers: int = _option(1, "stacked decoder layers", min=1)
    dropout: float = _option(0.1, "dropout on embeddings, convolutions and outputs", min=0.0)


CNN_TRANSLATOR = register_family(
    Family(
        name="cnn-rnn",
        kind="translator",
        options=CNNTranslatorOptions,
        build=cnn_translator,
        steps=RNNTranslatorSteps,
        learning_rate=2e-3,
        warmup_steps=200,
        schedule="cosine",
    )
)
