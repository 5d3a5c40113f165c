"""The lexicon of the synthetic corpus: word tables read from `keras_attn/text/data/`.

Each table is a tab-separated text file whose `#` lines say what the columns mean; "-" marks an
empty cell. This module turns the rows into the small records the grammar of
`keras_attn.text.synthetic` draws from, and conjugates the verbs.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

# Spanish person/number slots of a finite verb (yo, tú, él, nosotros, ellos), and the tenses.
SLOTS = ("1s", "2s", "3s", "1p", "3p")
TENSES = ("pres", "past", "fut")

# Noun kinds: P person, A animal, T thing, S count food, F mass food, D mass drink, L place.
_MASS_KINDS = frozenset("FD")

_PRESENT_ENDINGS = {
    "ar": ("o", "as", "a", "amos", "an"),
    "er": ("o", "es", "e", "emos", "en"),
    "ir": ("o", "es", "e", "imos", "en"),
}
_PAST_ENDINGS = {
    "ar": ("é", "aste", "ó", "amos", "aron"),
    "er": ("í", "iste", "ió", "imos", "ieron"),
    "ir": ("í", "iste", "ió", "imos", "ieron"),
}
_FUTURE_ENDINGS = ("é", "ás", "á", "emos", "án")
_PAST_1S_SPELLING = {"car": "qué", "gar": "gué", "zar": "cé"}


# The word classes of the English side, as in the Universal Dependencies tag set (Petrov et al.,
# 2012, arXiv:1104.2086; Nivre et al., 2016).
WORD_CLASSES = (
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
    "SCONJ", "VERB",
)  # fmt: skip


class Word(str):
    """An English word of the synthetic corpus that knows its word class (`tag`).

    It is the string itself wherever a string is expected; the grammar that puts it in a sentence
    chose the class with the word ("that" is a determiner, a relative pronoun or a conjunction).
    """

    tag: str

    def __new__(cls, text: str, tag: str) -> Word:
        word = super().__new__(cls, text)
        word.tag = tag
        return word

    def __getnewargs__(self) -> tuple[str, str]:
        return str(self), self.tag


def words(text: str, tag: str | None = None) -> list[Word]:
    """The words of `text` (split on spaces), each tagged `tag` or, by default, `text`'s own."""
    tag = tag or text.tag
    return [Word(part, tag) for part in text.split()]


def _tagged(text: str | None, tag: str) -> Word | None:
    return None if text is None else Word(text, tag)


@dataclass(frozen=True, eq=False)
class Noun:
    es_sg: str
    es_pl: str | None
    gender: str
    en_sg: str
    en_pl: str | None
    kind: str
    tags: frozenset[str]

    @property
    def mass(self) -> bool:
        return self.kind in _MASS_KINDS


@dataclass(frozen=True, eq=False)
class Adjective:
    forms: tuple[str, str, str, str]
    en: str
    kinds: str
    copula: str

    def form(self, gender: str, plural: bool) -> str:
        return self.forms[(gender == "f") + 2 * plural]


@dataclass(frozen=True, eq=False)
class Verb:
    forms: dict[tuple[str, str], str]
    en: tuple[str, str, str]  # base, 3rd singular, past
    frame: str  # "intr", "trans" or "comp"
    subjects: str  # noun kinds allowed as subject
    objects: str = ""  # noun kinds (or one tag) allowed as object
    loc: bool = False  # takes an optional location phrase
    live: bool = False  # "vivir en" + place
    core: bool = False  # also conjugated for "yo", "tú" and "nosotros"


def read_table(name: str) -> list[list[str | None]]:
    """Rows of the table `data/<name>.tsv`: tab-separated cells, "-" read as `None`."""
    text = resources.files(__package__).joinpath("data", f"{name}.tsv").read_text("utf-8")
    return [
        [None if cell == "-" else cell for cell in line.split("\t")]
        for line in text.splitlines()
        if line and not line.startswith("#")
    ]


def _grouped(rows: list[list[str | None]]) -> dict[str, list]:
    """`{first cell: [rest of the row, ...]}` in table order."""
    groups: dict[str, list] = {}
    for key, *rest in rows:
        groups.setdefault(key, []).append(rest[0] if len(rest) == 1 else rest)
    return groups


def _noun(es_sg, es_pl, gender, en_sg, en_pl, kind, tags) -> Noun:
    return Noun(
        es_sg,
        es_pl,
        gender,
        _tagged(en_sg, "NOUN"),
        _tagged(en_pl, "NOUN"),
        kind,
        frozenset(tags.split(",") if tags else ()),
    )


def _adjective(spec: str, en: str, kinds: str, copula: str) -> Adjective:
    if "/" in spec:
        forms = tuple(spec.split("/"))
    elif spec.endswith("o"):
        stem = spec[:-1]
        forms = (spec, stem + "a", stem + "os", stem + "as")
    elif spec.endswith("e"):
        forms = (spec, spec, spec + "s", spec + "s")
    else:
        raise ValueError(f"Adjective {spec!r} needs its four forms spelled out.")
    return Adjective(forms, Word(en, "ADJ"), kinds, copula)


def conjugate(
    infinitive: str, present: str | None = None, past: str | None = None, future: str | None = None
) -> dict[tuple[str, str], str]:
    """The finite forms `{(tense, slot): form}` of a verb.

    Regular endings apply unless `present` / `past` list all five forms; `future` is the stem of
    the future tense (the infinitive by default). A preterite "we" form equal to the present one
    ("caminamos" is both "we walk" and "we walked") is left out, keeping only the present reading.
    """
    stem, ending = infinitive[:-2], infinitive[-2:]
    present_forms = present.split() if present else [stem + e for e in _PRESENT_ENDINGS[ending]]
    if past:
        past_forms = past.split()
    else:
        past_forms = [stem + e for e in _PAST_ENDINGS[ending]]
        spelling = _PAST_1S_SPELLING.get(infinitive[-3:])
        if spelling:
            past_forms[0] = infinitive[:-3] + spelling
    future_forms = [(future or infinitive) + e for e in _FUTURE_ENDINGS]
    forms = {}
    for tense, paradigm in zip(TENSES, (present_forms, past_forms, future_forms), strict=True):
        for slot, form in zip(SLOTS, paradigm, strict=True):
            forms[tense, slot] = form
    if forms["past", "1p"] == forms["pres", "1p"]:
        del forms["past", "1p"]
    return forms


def _verb(infinitive, en, frame, subjects, objects, present, past, future, flags) -> Verb:
    flags = set(flags.split(",")) if flags else set()
    base, third, past_en = en.split("/")
    return Verb(
        conjugate(infinitive, present, past, future),
        (Word(base, "VERB"), Word(third, "VERB"), Word(past_en, "VERB")),
        frame,
        subjects,
        objects or "",
        "loc" in flags,
        "live" in flags,
        "core" in flags,
    )


NOUNS = tuple(_noun(*row) for row in read_table("nouns"))
ADJECTIVES = tuple(_adjective(*row) for row in read_table("adjectives"))
VERBS = tuple(_verb(*row) for row in read_table("verbs"))


# gender -> first names
NAMES = {
    gender: [Word(name, "PROPN") for name in names]
    for gender, names in _grouped(read_table("names")).items()
}

# (spanish, slot, english, english agreement "1s"/"3s"/"pl", gender or None for either)
PRONOUNS = tuple(
    (es, slot, Word(en, "PRON"), agr, gender)
    for es, slot, en, agr, gender in read_table("pronouns")
)
# (spanish, english words)
NUMBERS = tuple((es, words(en, "NUM")) for es, en in read_table("numbers"))
# name -> ((m_sg, f_sg, m_pl, f_pl) Spanish, English singular, English plural)
DETERMINERS = {
    name: ((m_sg, f_sg, m_pl, f_pl), _tagged(en_sg, "DET"), _tagged(en_pl, "DET"))
    for name, m_sg, f_sg, m_pl, f_pl, en_sg, en_pl in read_table("determiners")
}
# (spanish, english, noun kinds or tag)
LOCATIONS = tuple((es, Word(en, "ADP"), spec) for es, en, spec in read_table("locations"))
# (spanish, english, tenses allowed)
ADVERBS = tuple((es, Word(en, "ADV"), tenses) for es, en, tenses in read_table("adverbs"))
PRE_ADVERBS = tuple((es, Word(en, "ADV")) for es, en in read_table("pre_adverbs"))
# Coordinating ("and", "but") or subordinating ("because", "when", ...).
CONJUNCTIONS = {
    es: Word(en, "CCONJ" if en in ("and", "but") else "SCONJ")
    for es, en in read_table("conjunctions")
}
# copula -> tense -> the five forms in SLOTS order
COPULAS = {
    copula: {tense: tuple(forms) for tense, *forms in rows}
    for copula, rows in _grouped(read_table("copulas")).items()
}
HABER = dict(read_table("haber"))
