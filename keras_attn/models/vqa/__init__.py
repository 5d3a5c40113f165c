"""Visual question answering with parallel co-attention (Lu et al., 2016): the answerer and its
family.

The model's names are imported the first time they are used, so that importing the family's
options (`keras_attn.models.vqa.options`) imports neither Keras nor TensorFlow.
"""

from keras_attn import _lazy

__all__ = ["vqa_coattention"]
__getattr__, __dir__ = _lazy.lazy_names(__name__, dict.fromkeys(__all__, f"{__name__}.model"))
