"""Public layers: attention, recurrent, Transformer, embedding and pooling blocks."""

from keras_attn import _serializables
from keras_attn.layers.attention import (
    AreaAttention,
    Attention,
    BaseAttention,
    CoAttention,
    CompositionalDeAttention,
    ContextAttentionPooling,
    HardAttention,
    HierarchicalAttention,
    KernelAttention,
    LocalAttention,
    LuongAttentionalState,
    MultiDimensionalAttention,
    MultiHeadAttention,
    MultiRepresentationAttention,
)
from keras_attn.layers.embedding import (
    PositionEmbedding,
    SinusoidalPositionEncoding,
    TokenAndPositionEmbedding,
)
from keras_attn.layers.pooling import TokenPooling
from keras_attn.layers.recurrent import (
    BahdanauDecoder,
    BidirectionalEncoder,
    BiLanguageModel,
    DeepRNN,
    ElmanRNN,
    ElmanRNNCell,
    JordanRNN,
    JordanRNNCell,
    LuongDecoder,
    NeuralTuringMachine,
    NTMCell,
    PlainDecoder,
    ScalarMix,
    TeacherForcedRNN,
    VectorToSequence,
)
from keras_attn.layers.recurrent._recurrent_decoder import AttentionDecoder
from keras_attn.layers.transformer import (
    FeedForward,
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
)

__all__ = [
    "AreaAttention",
    "Attention",
    "AttentionDecoder",
    "BaseAttention",
    "BahdanauDecoder",
    "BiLanguageModel",
    "BidirectionalEncoder",
    "CoAttention",
    "CompositionalDeAttention",
    "ContextAttentionPooling",
    "DeepRNN",
    "ElmanRNN",
    "ElmanRNNCell",
    "FeedForward",
    "HardAttention",
    "HierarchicalAttention",
    "JordanRNN",
    "JordanRNNCell",
    "KernelAttention",
    "LocalAttention",
    "LuongAttentionalState",
    "LuongDecoder",
    "MultiDimensionalAttention",
    "MultiHeadAttention",
    "MultiRepresentationAttention",
    "NeuralTuringMachine",
    "NTMCell",
    "PlainDecoder",
    "PositionEmbedding",
    "ScalarMix",
    "SinusoidalPositionEncoding",
    "TeacherForcedRNN",
    "TokenAndPositionEmbedding",
    "TokenPooling",
    "TransformerDecoder",
    "TransformerDecoderBlock",
    "TransformerEncoder",
    "TransformerEncoderBlock",
    "VectorToSequence",
]

_serializables.imported(__name__)
