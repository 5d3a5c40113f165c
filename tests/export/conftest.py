import pytest

from keras_attn.export.translator import Translator
from keras_attn.models import RNNTranslatorSteps, rnn_attention_translator
from keras_attn.text.synthetic import generate_pairs
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import build_wordpiece_vocab


@pytest.fixture(scope="session")
def tiny_pairs():
    return generate_pairs(400, seed=3)


@pytest.fixture(scope="session")
def vocabularies(tiny_pairs):
    return (
        build_wordpiece_vocab([s for s, _ in tiny_pairs], 300),
        build_wordpiece_vocab([t for _, t in tiny_pairs], 300),
    )


@pytest.fixture
def make_translator(vocabularies):
    """An untrained tiny translator; keyword arguments go to `Translator` (e.g. the decoder)."""

    def make(**kwargs):
        source, target = (WordPieceTokenizer(vocab) for vocab in vocabularies)
        model = rnn_attention_translator(
            source.vocab_size, target.vocab_size, embedding_dim=8, units=16, dropout=0.0
        )
        return Translator(
            model, RNNTranslatorSteps(model), source, target, max_output_length=12, **kwargs
        )

    return make


@pytest.fixture
def translator(make_translator):
    return make_translator()


@pytest.fixture
def beam_translator(make_translator):
    return make_translator(decoder="beam", beam_size=3, length_penalty=0.6)
