"""Serving modules, the SavedModel writer and the contract checks of the exported graphs.

- `export_translator(model, source_vocabulary, target_vocabulary, model_base_path, ...)`:
  any Keras translator (`(source_ids, target_ids)` → next-token scores) as a TF Serving
  SavedModel with tokenization and greedy or beam-search decoding in the graph; also
  `export_translator(translator, model_base_path, ...)` for a `Translator` module.
- `PrefixSteps`: the step view `export_translator` and `export_generator` decode such models with.
- `export_generator`: a language model as a SavedModel: a `Generator` module (GPT), or any
  Keras model mapping token ids to next-token scores, decoded by `PrefixSteps` too.
- `translator`, `generator`, `captioner`: the `tf.Module`s the signatures wrap;
  `contract`: the checks an export passes before it is published; `cli`: `keras-attn export`.

The names above are imported when first used, so importing `keras_attn.export.cli` (to build
the command line's parser) imports no TensorFlow.
"""

from keras_attn import _lazy

_LAZY = {
    "PrefixSteps": "keras_attn.export.prefix_steps",
    "export_generator": "keras_attn.export.saved_model",
    "export_translator": "keras_attn.export.saved_model",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = _lazy.lazy_names(__name__, _LAZY)
