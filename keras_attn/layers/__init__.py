"""Public layers: attention, recurrent, Transformer and embedding blocks."""

from keras_attn.layers.attention import (
    AreaAttention,
    Attention,
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
from keras_attn.layers.recurrent import (
    BahdanauDecoder,
    BidirectionalEncoder,
    ElmanRNN,
    ElmanRNNCell,
    JordanRNN,
    JordanRNNCell,
    TeacherForcedRNN,
)

__all__ = [
    "AreaAttention",
    "Attention",
    "BahdanauDecoder",
    "BidirectionalEncoder",
    "CoAttention",
    "CompositionalDeAttention",
    "ContextAttentionPooling",
    "ElmanRNN",
    "ElmanRNNCell",
    "HardAttention",
    "HierarchicalAttention",
    "JordanRNN",
    "JordanRNNCell",
    "KernelAttention",
    "LocalAttention",
    "LuongAttentionalState",
    "MultiDimensionalAttention",
    "MultiHeadAttention",
    "MultiRepresentationAttention",
    "TeacherForcedRNN",
]
