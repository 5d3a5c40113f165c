"""The options of the recurrent translator families: `rnn-plain`, `rnn-attention` and
`rnn-luong` (the keyword arguments of their builders, with the builders' defaults).

This module imports neither TensorFlow nor Keras: `keras-attn train` reads it to build its flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from keras_attn.errors import ConfigError
from keras_attn.options import option_field

# The names of `keras_attn.scores.SCORES` and `keras_attn.distributions.DISTRIBUTIONS` (a test
# checks them against the registries) and the attentions of the Luong decoder.
SCORES = (
    "activated_general", "additive", "biased_general", "concat", "cosine", "deep", "dot",
    "feature", "general", "location", "residual_general", "scaled_dot", "scaled_general",
)  # fmt: skip
DISTRIBUTIONS = ("entmax", "entmax15", "hardmax", "sigmoid", "softmax", "sparsemax")
ATTENTIONS = ("global", "local-m", "local-p")
CELLS = ("lstm", "gru")
ENCODER_DIRECTIONS = ("bi", "uni")

# Options whose builder keyword has another name: the option keeps the name of its flag.
BUILDER_KEYWORDS = {"gru_reset_after": "reset_after"}


@dataclass(frozen=True)
class RecurrentOptions:
    """The options every recurrent translator takes."""

    embedding_dim: int = option_field(128, "width of the source and target embeddings", above=0)
    units: int = option_field(
        256, "width of the recurrent state (the encoder's two directions together)", above=0
    )
    cell: str = option_field("lstm", "recurrent cell of the encoder and decoder", choices=CELLS)
    gru_reset_after: bool = option_field(
        True,
        "the GRU's form, with cell gru only: on is Keras' and cuDNN's (reset gate after the "
        "recurrent product; the fused cuDNN kernel on a GPU); off is Cho et al.'s equations "
        "(reset gate before it; no cuDNN kernel)",
    )
    dropout: float = option_field(
        0.1, "dropout on the embeddings and the decoder outputs", min=0, below=1
    )
    num_layers: int = option_field(1, "recurrent layers of the encoder and of the decoder", above=0)
    encoder_direction: str = option_field(
        "bi",
        "bi: every encoder layer reads the source both ways (units / 2 per direction); uni: "
        "one direction of units (Sutskever et al.; Luong et al.)",
        choices=ENCODER_DIRECTIONS,
    )
    reverse_source: bool = option_field(
        False,
        "encoder direction uni only: the encoder reads the source reversed (Sutskever et al.)",
    )

    def validate(self) -> None:
        """Refuse the GRU's other form for a cell that is no GRU, and a reversed source for a
        bidirectional encoder."""
        if not self.gru_reset_after and self.cell != "gru":
            raise ConfigError(
                f"gru_reset_after chooses the form of a GRU: it needs cell='gru', got "
                f"cell={self.cell!r}",
                ["gru_reset_after", "cell"],
            )
        if self.reverse_source and self.encoder_direction != "uni":
            raise ConfigError(
                "reverse_source needs encoder_direction='uni' (a bidirectional encoder reads "
                f"both ways), got encoder_direction={self.encoder_direction!r}",
                ["reverse_source", "encoder_direction"],
            )


@dataclass(frozen=True)
class RNNPlainOptions(RecurrentOptions):
    """The options of `rnn-plain` (Sutskever et al., 2014; Cho et al., 2014)."""

    context_feeding: bool = option_field(
        True,
        "feed the encoder summary c to every decoder step (on: Cho et al.; off: Sutskever et al.)",
    )


@dataclass(frozen=True)
class RNNAttentionOptions(RecurrentOptions):
    """The options of `rnn-attention` (Bahdanau et al., 2015)."""

    score: str = option_field("additive", "alignment score of the attention", choices=SCORES)


@dataclass(frozen=True)
class RNNLuongOptions(RecurrentOptions):
    """The options of `rnn-luong` (Luong et al., 2015)."""

    score: str = option_field("general", "alignment score of the attention", choices=SCORES)
    distribution: str = option_field(
        "softmax", "the attention weights' distribution", choices=DISTRIBUTIONS
    )
    attention: str = option_field(
        "global",
        "global: over every source position; local-m: a window of 2 window + 1 positions "
        "centred on the target position; local-p: a window at a predicted position",
        choices=ATTENTIONS,
    )
    window: int = option_field(10, "half width D of a local attention's window", above=0)
    input_feeding: bool = option_field(
        True, "feed the previous attentional vector h~_{t-1} to the decoder cell"
    )
    position_gradient_scale: float = option_field(
        1.0,
        "attention local-p only: a factor on the gradients of the position predictor (W_p, "
        "v_p), its learning rate relative to the rest under the sgd optimizer",
        above=0,
        float32=True,
    )

    def validate(self) -> None:
        """Also refuse a position predictor's gradient scale without a position predictor."""
        super().validate()
        if self.position_gradient_scale != 1.0 and self.attention != "local-p":
            raise ConfigError(
                "position_gradient_scale applies to attention='local-p' only, got "
                f"attention={self.attention!r}",
                ["position_gradient_scale", "attention"],
            )


# The built-in families of this folder and their options (`keras_attn.models.family_options`
# collects these tables).
FAMILY_OPTIONS = {
    "rnn-plain": RNNPlainOptions,
    "rnn-attention": RNNAttentionOptions,
    "rnn-luong": RNNLuongOptions,
}
