import pytest

from keras_attn.export.translator import Translator
from keras_attn.models import RNNTranslatorSteps, rnn_attention_translator
from keras_attn.text.synthetic import generate_pairs
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import build_wordpiece_vocab


@pytest.fixture(scope="session")
def tiny_pairs():
    return generate_pairs(400, seed=3)


@pytest.fixture
def translator(tiny_pairs):
    source = WordPieceTokenizer(build_wordpiece_vocab([s for s, _ in tiny_pairs], 300))
    target = WordPieceTokenizer(build_wordpiece_vocab([t for _, t in tiny_pairs], 300))
    model = rnn_attention_translator(
        source.vocab_size, target.vocab_size, embedding_dim=8, units=16, dropout=0.0
    )
    return Translator(model, RNNTranslatorSteps(model), source, target, max_output_length=12)
