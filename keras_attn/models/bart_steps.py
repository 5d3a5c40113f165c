"""`BartSteps`: another name of `TransformerTranslatorSteps`, the cached step view of every
Transformer encoder–decoder (`bart` and `bart_translator` included)."""

from keras_attn.models.transformer_translator_steps import BartSteps

__all__ = ["BartSteps"]
