"""Thesaurus data augmentation for text classifiers (Zhang, Zhao & LeCun, 2015, section 2.4).

A sentence is copied with some of its words replaced by synonyms: the number of words replaced
`r` and the index `s` of the synonym each takes (in the thesaurus' order, the most common sense
first) follow geometric distributions, `P[r] ~ p^r` and `P[s] ~ q^s`, so that most copies change
one or two words to their closest synonyms. The synonyms come from the LibreOffice thesauri
(MyThes format) of the Debian packages `mythes-en-us` and `mythes-es`, which `make corpora`
unpacks beside the corpora (`keras_attn.text.corpora.corpora_dir`), or from any table of
synonyms given as a dict.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from keras_attn.text.corpora import SYSTEM_ROOT, CorpusNotInstalledError, corpora_dir

# Language -> (Debian package, the MyThes data file inside it).
THESAURI = {
    "en": ("mythes-en-us", "usr/share/mythes/th_en_US_v2.dat"),
    "es": ("mythes-es", "usr/share/mythes/th_es_ES_v2.dat"),
}
_WORD = re.compile(r"[^\W\d_]+")


def thesaurus_path(language: str) -> Path:
    """The MyThes data file of `language` ("en" or "es") that `make corpora` installs.

    Raises:
        ValueError: a language without a thesaurus.
        CorpusNotInstalledError: its package is not unpacked (the message says how).
    """
    if language not in THESAURI:
        raise ValueError(f"Expected language in {sorted(THESAURI)}. Received: {language!r}")
    package, relative = THESAURI[language]
    for root in (corpora_dir() / package, SYSTEM_ROOT):
        if (root / relative).is_file():
            return root / relative
    raise CorpusNotInstalledError(
        f"the {language} thesaurus is not installed: run `make corpora` (it unpacks the Debian "
        f"package {package} into {corpora_dir()})"
    )


def read_mythes(path: str | os.PathLike) -> dict[str, list[str]]:
    """`{word: synonyms}` of a MyThes data file, both lower-cased single words.

    The file's first line names its encoding; each entry is `word|n` followed by `n` meaning
    lines `(part of speech)|term|term|...`. A term annotated `(generic term)`, `(related term)`,
    `(similar term)` or `(antonym)` is not a synonym and is left out, as are multi-word terms;
    the synonyms keep the file's order (meanings first to last), without repeats.
    """
    with open(path, "rb") as file:
        encoding = file.readline().decode("ascii").strip() or "utf-8"
        lines = file.read().decode(encoding).splitlines()
    table: dict[str, list[str]] = {}
    index = 0
    while index < len(lines):
        head, _, count = lines[index].rpartition("|")
        index += 1
        if not count.isdigit():
            continue
        meanings, index = lines[index : index + int(count)], index + int(count)
        word = head.lower()
        if not _WORD.fullmatch(word):
            continue
        synonyms = table.setdefault(word, [])
        for meaning in meanings:
            for term in meaning.split("|")[1:]:
                term = term.strip().lower()
                if _WORD.fullmatch(term) and term != word and term not in synonyms:
                    synonyms.append(term)
    return {word: synonyms for word, synonyms in table.items() if synonyms}


def load_thesaurus(language: str) -> dict[str, list[str]]:
    """`read_mythes(thesaurus_path(language))`."""
    return read_mythes(thesaurus_path(language))


def augment(
    text: str,
    thesaurus: Mapping[str, Sequence[str]],
    rng: np.random.Generator,
    p: float = 0.5,
    q: float = 0.5,
) -> str:
    """`text` with `r` of its words that have synonyms replaced, `P[r] ~ p^r` (`r >= 1`, at
    most the number of such words), each by its synonym of index `s`, `P[s] ~ q^s` (`s >= 0`,
    at most the last). Everything else, spacing and punctuation included, is kept; a replaced
    word keeps a capital first letter.

    Raises:
        ValueError: `p` or `q` not in (0, 1).
    """
    for name, value in (("p", p), ("q", q)):
        if not 0.0 < value < 1.0:
            raise ValueError(f"Expected {name} in (0, 1). Received: {name}={value!r}")
    matches = [m for m in _WORD.finditer(text) if thesaurus.get(m.group().lower())]
    if not matches:
        return text
    count = min(int(rng.geometric(1.0 - p)), len(matches))
    chosen = sorted(rng.choice(len(matches), count, replace=False))
    pieces, last = [], 0
    for i in chosen:
        match = matches[i]
        synonyms = thesaurus[match.group().lower()]
        synonym = synonyms[min(int(rng.geometric(1.0 - q)) - 1, len(synonyms) - 1)]
        if match.group()[0].isupper():
            synonym = synonym[0].upper() + synonym[1:]
        pieces += [text[last : match.start()], synonym]
        last = match.end()
    return "".join(pieces) + text[last:]


def augment_examples(
    texts: Sequence[str],
    labels: Sequence,
    thesaurus: Mapping[str, Sequence[str]],
    copies: int,
    seed: int = 0,
) -> tuple[list[str], list]:
    """The examples followed by `copies` augmented copies of each (same label), for training.

    Copies equal to their original (no word with a synonym) are left out.
    """
    rng = np.random.default_rng(seed)
    out_texts, out_labels = list(texts), list(labels)
    for _ in range(copies):
        for text, label in zip(texts, labels, strict=True):
            changed = augment(text, thesaurus, rng)
            if changed != text:
                out_texts.append(changed)
                out_labels.append(label)
    return out_texts, out_labels
