"""Attention structures: global, local, hard, area, multi-head, kernel, pooling, co-attention,
and DRAW's Gaussian read and write."""

from keras_attn.layers.attention.area_attention import AreaAttention
from keras_attn.layers.attention.attention import Attention
from keras_attn.layers.attention.base_attention import BaseAttention
from keras_attn.layers.attention.co_attention import CoAttention
from keras_attn.layers.attention.compositional_de_attention import CompositionalDeAttention
from keras_attn.layers.attention.context_attention_pooling import ContextAttentionPooling
from keras_attn.layers.attention.draw_attention import DrawRead, DrawWrite
from keras_attn.layers.attention.hard_attention import HardAttention
from keras_attn.layers.attention.hierarchical_attention import HierarchicalAttention
from keras_attn.layers.attention.kernel_attention import KernelAttention
from keras_attn.layers.attention.local_attention import LocalAttention
from keras_attn.layers.attention.luong_attentional_state import LuongAttentionalState
from keras_attn.layers.attention.multi_dimensional_attention import MultiDimensionalAttention
from keras_attn.layers.attention.multi_head_attention import MultiHeadAttention
from keras_attn.layers.attention.multi_representation_attention import MultiRepresentationAttention
from keras_attn.layers.attention.parallel_co_attention import ParallelCoAttention

__all__ = [
    "AreaAttention",
    "Attention",
    "BaseAttention",
    "CoAttention",
    "CompositionalDeAttention",
    "ContextAttentionPooling",
    "DrawRead",
    "DrawWrite",
    "HardAttention",
    "HierarchicalAttention",
    "KernelAttention",
    "LocalAttention",
    "LuongAttentionalState",
    "MultiDimensionalAttention",
    "MultiHeadAttention",
    "MultiRepresentationAttention",
    "ParallelCoAttention",
]
