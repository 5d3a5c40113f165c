import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.text.tokenizer import WordPieceTokenizer, normalize_text
from keras_attn.text.vocab import RESERVED_TOKENS, save_vocab

SMALL_VOCAB = RESERVED_TOKENS + ["¿", "?", ".", "dónde", "está", "el", "gato", "ne", "##gro"]


@pytest.fixture(scope="module")
def tokenizers(vocabs):
    return WordPieceTokenizer(vocabs[0]), WordPieceTokenizer(vocabs[1])


def decode(tensor):
    return [t.decode() for t in tensor.numpy()]


def test_reserved_ids_and_attributes():
    tokenizer = WordPieceTokenizer(SMALL_VOCAB)
    ids = (tokenizer.pad_id, tokenizer.unk_id, tokenizer.start_id, tokenizer.end_id)
    assert ids == (0, 1, 2, 3)
    assert tokenizer.vocab_size == len(SMALL_VOCAB)
    assert tokenizer.vocab == SMALL_VOCAB


@pytest.mark.parametrize(
    "vocab, message",
    [(["[UNK]", "[PAD]", "[START]", "[END]"], "start with"), (SMALL_VOCAB + ["el"], "distinct")],
)
def test_rejects_bad_vocabularies(vocab, message):
    with pytest.raises(ValueError, match=message):
        WordPieceTokenizer(vocab)


def test_tokenize_normalizes_and_maps_unknown_words_to_unk():
    tokenizer = WordPieceTokenizer(SMALL_VOCAB)
    ids = tokenizer.tokenize(tf.constant(["¿Dónde  está el gato NEGRO?", "El perro.", ""]))
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int64
    assert ids.to_list() == [[4, 7, 8, 9, 10, 11, 12, 5], [9, 1, 6], []]


def test_detokenize_cuts_at_end_and_drops_pad_and_start():
    tokenizer = WordPieceTokenizer(SMALL_VOCAB)
    dense = tf.constant(
        [[2, 4, 7, 8, 9, 10, 11, 12, 5, 3, 10, 0], [2, 9, 1, 6, 0, 0, 3, 9, 0, 0, 0, 0]]
    )
    for ids in (dense, tf.cast(dense, tf.int32)):
        assert decode(tokenizer.detokenize(ids)) == ["¿dónde está el gato negro?", "el [UNK]."]
    ragged = tf.ragged.constant([[9, 10, 11, 12], [3, 9], []], tf.int64)
    assert decode(tokenizer.detokenize(ragged)) == ["el gato negro", "", ""]


def test_id_to_token_shows_pieces_and_blanks_padding():
    tokenizer = WordPieceTokenizer(SMALL_VOCAB)
    tokens = tokenizer.id_to_token(tf.constant([[9, 11, 12, 3, 0], [1, 2, 0, 0, 99]]))
    assert tokens.numpy().tolist() == [
        [b"el", b"ne", b"##gro", b"[END]", b""],
        [b"[UNK]", b"[START]", b"", b"", b"[UNK]"],
    ]
    ragged = tokenizer.id_to_token(tf.ragged.constant([[9], [10, 0]]))
    assert ragged.to_list() == [[b"el"], [b"gato", b""]]


def test_round_trip_on_corpus_sentences(splits, tokenizers):
    sample = splits["test"][:400]
    for side, tokenizer in enumerate(tokenizers):
        sentences = [pair[side] for pair in sample]
        ids = tokenizer.tokenize(tf.constant(sentences))
        assert not np.any(ids.flat_values.numpy() == tokenizer.unk_id)
        assert decode(tokenizer.detokenize(ids)) == [normalize_text(s) for s in sentences]
        # Nearly every word is one piece: a few rare forms split into two.
        words = sum(len(normalize_text(s).replace("¿", "¿ ").split()) for s in sentences)
        pieces = int(ids.flat_values.shape[0])
        punctuation = sum(normalize_text(s).count(p) for s in sentences for p in ".,?")
        assert words + punctuation <= pieces < 1.01 * (words + punctuation)


def test_methods_trace_inside_tf_function(tokenizers):
    tokenizer = tokenizers[1]
    text = tf.constant(["Where is the black cat?", "The cats do not sleep."])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def run(strings):
        ids = tokenizer.tokenize(strings)
        dense = ids.to_tensor(default_value=tokenizer.pad_id)
        return ids.flat_values, tokenizer.detokenize(dense), tokenizer.id_to_token(dense)

    flat, detok, tokens = run(text)
    eager = tokenizer.tokenize(text)
    np.testing.assert_array_equal(flat.numpy(), eager.flat_values.numpy())
    assert decode(detok) == ["where is the black cat?", "the cats do not sleep."]
    assert tokens.numpy()[0, :5].tolist() == [b"where", b"is", b"the", b"black", b"cat"]


def test_from_file(tmp_path):
    path = tmp_path / "vocab.txt"
    save_vocab(path, SMALL_VOCAB)
    tokenizer = WordPieceTokenizer.from_file(path)
    assert tokenizer.vocab == SMALL_VOCAB
    assert tokenizer.tokenize(tf.constant(["el gato"])).to_list() == [[9, 10]]


class _Pipeline(tf.Module):
    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, text):
        ids = self.tokenizer.tokenize(text).to_tensor(default_value=self.tokenizer.pad_id)
        return {
            "ids": ids,
            "normalized": self.tokenizer.normalize(text),
            "text": self.tokenizer.detokenize(ids),
            "tokens": self.tokenizer.id_to_token(ids),
        }


def test_saved_model_loads_with_only_tensorflow_and_tensorflow_text(tmp_path, tokenizers, splits):
    module = _Pipeline(tokenizers[0])
    sentences = [es for es, _ in splits["test"][:5]] + ["¿Dónde está el gatø?", ""]
    expected = {k: v.numpy() for k, v in module(tf.constant(sentences)).items()}
    tf.saved_model.save(module, str(tmp_path / "model"))
    np.savez(tmp_path / "input.npz", text=np.array(sentences, dtype=object))
    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 (registers the tf-text ops)

        model = tf.saved_model.load(sys.argv[1] + "/model")
        text = np.load(sys.argv[1] + "/input.npz", allow_pickle=True)["text"]
        outputs = model(tf.constant(text.tolist()))
        assert "keras_attn" not in sys.modules
        np.savez(sys.argv[1] + "/output.npz", **{k: v.numpy() for k, v in outputs.items()})
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = np.load(tmp_path / "output.npz", allow_pickle=True)
    for key, value in expected.items():
        np.testing.assert_array_equal(loaded[key], value)
    assert decode(tf.constant(loaded["text"]))[:5] == [normalize_text(s) for s in sentences[:5]]
    assert tokenizers[0].unk_id in loaded["ids"][5]
