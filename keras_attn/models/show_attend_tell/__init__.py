"""Show, Attend and Tell (Xu et al., 2015): the captioner, its step view and its family.

The package keeps the names of the module it was: `.keras` files record
`keras_attn.models.show_attend_tell` as the module of `ShowAttendTellDecoder`. They are imported
the first time they are used, so that importing the family's options
(`keras_attn.models.show_attend_tell.options`) imports neither Keras nor TensorFlow.
"""

from keras_attn import _lazy

__all__ = ["ATTENTIONS", "ShowAttendTellDecoder", "doubly_stochastic_penalty", "show_attend_tell"]
__getattr__, __dir__ = _lazy.lazy_names(__name__, dict.fromkeys(__all__, f"{__name__}.model"))
