"""Text for the translator: corpora, WordPiece vocabularies and in-graph tokenization.

- `synthetic`: the grammar-generated Spanish→English corpus; its word tables are the tab-separated
  files of `keras_attn/text/data/`.
- `corpora`: corpora by name (`load_corpus("synthetic")`), the real ones (Ding de→en, Bible es→en,
  LibreOffice help es→en) and TSV files, deduplicated, length-filtered and split by source.
- `normalization`: the normalization shared by tokenizer, vocabulary builder and references.
- `vocab`: building, saving and loading WordPiece vocabularies.
- `tokenizer`: `WordPieceTokenizer`, a `tf.Module` that exports to SavedModel.
- `noising`: BART's noising functions (masking, deletion, infilling, permutation, rotation) for
  `tf.data`.
"""
