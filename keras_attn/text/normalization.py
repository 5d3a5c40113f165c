"""Text normalization shared by the tokenizer, the vocabulary builder and reference scoring.

`normalize_strings` runs in the graph (tf-text and TF core ops only); `normalize_text` is the same
function in pure Python, for references that never enter a graph (BLEU, exact match).
"""

from __future__ import annotations

import re
import unicodedata

import tensorflow as tf
import tensorflow_text as tf_text

__all__ = ["normalize_strings", "normalize_text"]

# ASCII whitespace: the class RE2's `\s` matches, spelled out so Python's `re` matches the same.
_WHITESPACE = r"[ \t\n\r\f\v]+"
_SPACE_BEFORE_PUNCTUATION = r" ([.,!?;:])"
_SPACE_AFTER_OPENING = r"([¿¡]) "
_EDGE_SPACE = r"^ | $"


def normalize_strings(strings: tf.Tensor) -> tf.Tensor:
    """Case-folds, applies NFKC, collapses whitespace and fixes spacing around punctuation.

    Accents are kept ("está" stays "está"). No space is left before `.,!?;:` or after `¿¡`, so
    the result is also the form `WordPieceTokenizer.detokenize` produces.

    Args:
        strings: string tensor of any shape.

    Returns:
        A string tensor of the same shape.

    Example:

    >>> normalize_strings(tf.constant(["  ¿Dónde  está\\tel gato ?"])).numpy()[0].decode()
    '¿dónde está el gato?'
    """
    strings = tf_text.case_fold_utf8(strings)
    strings = tf_text.normalize_utf8(strings, "NFKC")
    strings = tf.strings.regex_replace(strings, _WHITESPACE, " ")
    strings = tf.strings.regex_replace(strings, _EDGE_SPACE, "")
    return clean_punctuation_spacing(strings)


def clean_punctuation_spacing(strings: tf.Tensor) -> tf.Tensor:
    """Removes the single space before `.,!?;:` and after `¿¡` (input has single spaces).

    Args:
        strings: string tensor of any shape whose whitespace is already single spaces.

    Returns:
        A string tensor of the same shape.

    Example:

    >>> clean_punctuation_spacing(tf.constant(["¿ hola , mundo ?"])).numpy()[0].decode()
    '¿hola, mundo?'
    """
    strings = tf.strings.regex_replace(strings, _SPACE_BEFORE_PUNCTUATION, r"\1")
    return tf.strings.regex_replace(strings, _SPACE_AFTER_OPENING, r"\1")


def normalize_text(text: str) -> str:
    """Pure-Python twin of `normalize_strings` for one string.

    For corpus sentences this equals `detokenize(tokenize(text))` of `WordPieceTokenizer`, so
    references and hypotheses compare in the same form.

    Args:
        text: any string.

    Returns:
        The normalized string.

    Example:

    >>> normalize_text("¿Dónde está el gato negro?")
    '¿dónde está el gato negro?'
    >>> normalize_text("Where is  the black cat ?")
    'where is the black cat?'
    """
    text = unicodedata.normalize("NFKC", text.casefold())
    text = re.sub(_WHITESPACE, " ", text)
    text = re.sub(_EDGE_SPACE, "", text)
    text = re.sub(_SPACE_BEFORE_PUNCTUATION, r"\1", text)
    return re.sub(_SPACE_AFTER_OPENING, r"\1", text)
