"""Text for the models: corpora, WordPiece vocabularies, in-graph tokenization, pre-training data.

- `synthetic`: the grammar-generated Spanish→English corpus; its word tables are the tab-separated
  files of `keras_attn/text/data/`.
- `corpora`: corpora by name (`load_corpus("synthetic")`), the real ones (Ding de→en, Bible es→en,
  LibreOffice help es→en) and TSV files, deduplicated, length-filtered and split by source; their
  monolingual text as ordered documents for pre-training (`load_documents`, `load_monolingual`).
- `normalization`: the normalization shared by tokenizer, vocabulary builder and references.
- `vocab`: building, saving and loading WordPiece vocabularies.
- `tokenizer`: `WordPieceTokenizer`, a `tf.Module` that exports to SavedModel.
- `noising`: BART's noising functions (masking, deletion, infilling, permutation, rotation) for
  `tf.data`, and `denoise`, their composition.
- `denoising`: (m)BART's vocabulary layout (`[MASK]`, `[SEP]`, language tags) and denoising
  examples.
- `masked_lm`: BERT's masked-LM corruption, `[CLS] A [SEP] B [SEP]` packing and next-sentence
  pairs.
- `classification`: labelled sentences for classifiers (built-in tasks made from the corpora,
  `text TAB label` files) and tagged sentences for token classification (`tokens TAB tags`).
"""
