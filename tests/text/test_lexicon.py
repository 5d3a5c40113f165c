from importlib import resources

import pytest

from keras_attn.text import _lexicon
from keras_attn.text._lexicon import conjugate, read_table

TABLES = {
    "nouns": 7,
    "adjectives": 4,
    "verbs": 9,
    "names": 2,
    "pronouns": 5,
    "numbers": 2,
    "determiners": 7,
    "locations": 3,
    "adverbs": 3,
    "pre_adverbs": 2,
    "conjunctions": 2,
    "copulas": 7,
    "haber": 2,
}


def test_every_table_is_package_data():
    data = resources.files("keras_attn.text").joinpath("data")
    assert sorted(p.name for p in data.iterdir() if p.name.endswith(".tsv")) == sorted(
        f"{name}.tsv" for name in TABLES
    )


@pytest.mark.parametrize("name, columns", sorted(TABLES.items()))
def test_rows_have_the_documented_columns(name, columns):
    rows = read_table(name)
    assert rows
    assert {len(row) for row in rows} == {columns}
    assert all(cell is None or (cell.strip() == cell and cell) for row in rows for cell in row)


def test_lexicon_sizes():
    assert len(_lexicon.NOUNS) == 142
    assert len(_lexicon.ADJECTIVES) == 71
    assert len(_lexicon.VERBS) == 60
    assert {len(names) for names in _lexicon.NAMES.values()} == {10}
    assert set(_lexicon.COPULAS) == {"ser", "estar"}
    assert all(set(tenses) == set(_lexicon.TENSES) for tenses in _lexicon.COPULAS.values())


def test_regular_conjugation_and_spelling_change():
    forms = conjugate("buscar")
    assert [forms["pres", slot] for slot in _lexicon.SLOTS] == [
        "busco",
        "buscas",
        "busca",
        "buscamos",
        "buscan",
    ]
    assert forms["past", "1s"] == "busqué"
    assert forms["fut", "3p"] == "buscarán"
    # "buscamos" is present and preterite: only the present reading is kept.
    assert ("past", "1p") not in forms


def test_irregular_forms_and_future_stem():
    forms = conjugate(
        "tener",
        present="tengo tienes tiene tenemos tienen",
        past="tuve tuviste tuvo tuvimos tuvieron",
        future="tendr",
    )
    assert forms["pres", "1s"] == "tengo"
    assert forms["past", "3s"] == "tuvo"
    assert forms["past", "1p"] == "tuvimos"
    assert forms["fut", "1s"] == "tendré"


def test_adjectives_inflect():
    black = next(a for a in _lexicon.ADJECTIVES if a.en == "black")
    assert [black.form(g, p) for p in (False, True) for g in "mf"] == [
        "negro",
        "negra",
        "negros",
        "negras",
    ]
    blue = next(a for a in _lexicon.ADJECTIVES if a.en == "blue")
    assert blue.form("f", True) == "azules"
