"""Decoding strategies over one step contract: `step(token_ids_t, state) -> (logits_t, state)`."""

from keras_attn import _serializables
from keras_attn.decoding.beam_search import beam_search
from keras_attn.decoding.greedy import greedy_search
from keras_attn.decoding.result import DecodingResult
from keras_attn.decoding.sampling import filter_logits, sample

__all__ = ["DecodingResult", "beam_search", "filter_logits", "greedy_search", "sample"]

_serializables.imported(__name__)
