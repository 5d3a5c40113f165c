"""Show, Attend and Tell (Xu et al., 2015): the captioner, its step view and its family.

The package keeps the names of the module it was: `.keras` files record
`keras_attn.models.show_attend_tell` as the module of `ShowAttendTellDecoder`.
"""

from keras_attn.models.show_attend_tell.model import (
    ATTENTIONS,
    ShowAttendTellDecoder,
    doubly_stochastic_penalty,
    show_attend_tell,
)

__all__ = ["ATTENTIONS", "ShowAttendTellDecoder", "doubly_stochastic_penalty", "show_attend_tell"]
