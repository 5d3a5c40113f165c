import pytest
import tensorflow as tf

from keras_attn.text.normalization import (
    clean_punctuation_spacing,
    normalize_strings,
    normalize_text,
)

CASES = [
    ("¿Dónde está el gato negro?", "¿dónde está el gato negro?"),
    ("  Where is\tthe  black cat ?  ", "where is the black cat?"),
    ("¡ HOLA , Mundo !", "¡hola, mundo!"),
    ("ÁRBOL Ñandú", "árbol ñandú"),
    ("ﬁn ①", "fin 1"),  # NFKC compatibility forms
    ("", ""),
]


@pytest.mark.parametrize("text, expected", CASES)
def test_python_and_graph_normalization_agree(text, expected):
    assert normalize_text(text) == expected
    assert normalize_strings(tf.constant([text])).numpy()[0].decode() == expected


def test_graph_normalization_keeps_shape_and_runs_in_a_function():
    texts = tf.constant([[case[0] for case in CASES[:3]]])
    result = tf.function(normalize_strings)(texts)
    assert result.shape == (1, 3)
    assert [t.decode() for t in result.numpy()[0]] == [case[1] for case in CASES[:3]]


def test_clean_punctuation_spacing():
    result = clean_punctuation_spacing(tf.constant(["¿ qué ? sí , no . ¡ ya !"]))
    assert result.numpy()[0].decode() == "¿qué? sí, no. ¡ya!"
