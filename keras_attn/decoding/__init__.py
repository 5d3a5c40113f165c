"""Decoding strategies over one step contract: `step(token_ids_t, state) -> (logits_t, state)`."""

from keras_attn.decoding.greedy import greedy_search
from keras_attn.decoding.result import DecodingResult

__all__ = ["DecodingResult", "greedy_search"]
