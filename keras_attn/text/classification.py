"""Labelled sentences for classification and tagging: built-in tasks and tab-separated files.

`load_classification_data(name_or_path)` is the one entry point for sentence classification:

- a built-in task, made from the parallel corpora of `keras_attn.text.corpora` (`TASKS`):
  `source-id` (is an English sentence a dictionary example of `ding-de-en`, a Bible verse of
  `bible-es-en` or a help paragraph of `libreoffice-es-en`?), `language-id` (German, English or
  Spanish?) and `synthetic-language-id` (Spanish or English side of the generated corpus, needs
  nothing installed); the short names `source`, `language` and `synthetic` name them too;
- or a file of `text TAB label` lines (`read_classification_tsv`).

`load_tagging_data(name_or_path)` is the one for token classification: the built-in
`synthetic-tags` (the English side of the generated corpus, each word tagged with its word class
by the grammar that generated it, needs nothing installed; `load_tagging_task`) or a file of
`tokens TAB tags` lines (`read_tagging_tsv`).

Files are split as `keras_attn.text.corpora` splits a parallel corpus (`split_by_hash`): by the
SHA-256 of the text, dev the first 5 % of the distinct texts (at most 1,000), test the next 5 %,
train the rest, so the split is fixed by the data and does not depend on the seed. The built-in
tasks take their sentences from the corpora's own train, dev and test splits.

`examples_per_class=N` keeps N training sentences of each class — a seeded draw, nested (the
N = 50 sentences are among the N = 200 ones for the same seed) — to measure learning curves with
few labels (Devlin et al., 2018, arXiv:1810.04805; Radford et al., 2018); dev and test stay the
same.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from keras_attn.text import corpora, synthetic

__all__ = [
    "DEV_TEST_PER_CLASS",
    "TASKS",
    "TAGGING_TASKS",
    "TASK_ALIASES",
    "ClassificationData",
    "TaggingData",
    "load_classification_data",
    "load_classification_task",
    "load_tagging_data",
    "load_tagging_task",
    "read_classification_tsv",
    "read_tagging_tsv",
    "task_name",
]

Example = tuple[str, int]
TaggedSentence = tuple[tuple[str, ...], tuple[int, ...]]

# task -> class name -> the (corpus, side) pairs its sentences come from.
TASKS: dict[str, dict[str, tuple[tuple[str, str], ...]]] = {
    "source-id": {
        "dictionary": (("ding-de-en", "target"),),
        "Bible": (("bible-es-en", "target"),),
        "help": (("libreoffice-es-en", "target"),),
    },
    "language-id": {
        "German": (("ding-de-en", "source"),),
        "English": (
            ("ding-de-en", "target"),
            ("bible-es-en", "target"),
            ("libreoffice-es-en", "target"),
        ),
        "Spanish": (("bible-es-en", "source"), ("libreoffice-es-en", "source")),
    },
    "synthetic-language-id": {
        "Spanish": (("synthetic", "source"),),
        "English": (("synthetic", "target"),),
    },
}
TASK_ALIASES = {
    "source": "source-id",
    "language": "language-id",
    "synthetic": "synthetic-language-id",
}
DEV_TEST_PER_CLASS = 500  # sentences per class in a built-in task's dev and test sets
# Built-in tagging tasks: name -> what its sentences come from.
TAGGING_TASKS = {"synthetic-tags": "synthetic"}


@dataclass(frozen=True)
class ClassificationData:
    """Sentences with class labels.

    Attributes:
        train: `(text, label)` training examples, `label` an index into `label_names`.
        dev: `(text, label)` development examples.
        test: `(text, label)` test examples.
        label_names: the class names, by label.
    """

    train: list[Example]
    dev: list[Example]
    test: list[Example]
    label_names: tuple[str, ...]


@dataclass(frozen=True)
class TaggingData:
    """Token sequences with one tag per token.

    Attributes:
        train: `(tokens, tags)` training sentences, `tags[i]` an index into `tag_names`.
        dev: `(tokens, tags)` development sentences.
        test: `(tokens, tags)` test sentences.
        tag_names: the tag names, by index.
    """

    train: list[TaggedSentence]
    dev: list[TaggedSentence]
    test: list[TaggedSentence]
    tag_names: tuple[str, ...]


def task_name(name: str) -> str | None:
    """The built-in task `name` names (`"source"` → `"source-id"`), or None if it names none."""
    name = TASK_ALIASES.get(name, name)
    return name if name in TASKS else None


def _is_path(name: str) -> bool:
    return name.endswith((".tsv", ".txt")) or os.sep in name or Path(name).is_file()


def _normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def _rank(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------
# Tab-separated files.


def _two_columns(path: str | os.PathLike, number: int, line: str, layout: str) -> list[str]:
    columns = line.split("\t")
    if len(columns) != 2:
        found = "a line without a tab" if len(columns) == 1 else f"{len(columns)} columns"
        raise ValueError(f"{path}:{number}: expected {layout}, got {found}: {line[:60]!r}")
    return columns


def read_classification_tsv(path: str | os.PathLike) -> list[tuple[str, str]]:
    """Reads `(text, label)` examples from a UTF-8 file of `text TAB label` lines.

    Text and label are NFC-normalized with whitespace collapsed. Blank lines, and lines starting
    with `#` that have no tab, are skipped.

    Args:
        path: the file.

    Returns:
        The examples in file order.

    Raises:
        FileNotFoundError: if `path` is not a file.
        ValueError: naming the file and line, on text that is not UTF-8, a line without exactly
            one tab, or an empty text or label.
    """
    examples = []
    for number, line in corpora.read_lines(path, what="classification file"):
        text, label = (
            _normalize(column) for column in _two_columns(path, number, line, "text<TAB>label")
        )
        for what, value in (("text", text), ("label", label)):
            if not value:
                raise ValueError(f"{path}:{number}: empty {what}: {line[:60]!r}")
        examples.append((text, label))
    return examples


def read_tagging_tsv(path: str | os.PathLike) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Reads `(tokens, tags)` sentences from a UTF-8 file of `tokens TAB tags` lines.

    Tokens and tags are separated by spaces, one tag per token (`"Juan vive en Madrid\\tB-PER O O
    B-LOC"`); tokens are NFC-normalized. Blank lines, and lines starting with `#` that have no
    tab, are skipped.

    Args:
        path: the file.

    Returns:
        The sentences in file order.

    Raises:
        FileNotFoundError: if `path` is not a file.
        ValueError: naming the file and line, on text that is not UTF-8, a line without exactly
            one tab, no tokens, or a number of tags different from the number of tokens.
    """
    sentences = []
    for number, line in corpora.read_lines(path, what="tagging file"):
        tokens, tags = (
            tuple(unicodedata.normalize("NFC", column).split())
            for column in _two_columns(path, number, line, "tokens<TAB>tags")
        )
        if not tokens:
            raise ValueError(f"{path}:{number}: no tokens: {line[:60]!r}")
        if len(tags) != len(tokens):
            raise ValueError(
                f"{path}:{number}: expected one tag per token, got {len(tokens)} tokens and "
                f"{len(tags)} tags: {line[:60]!r}"
            )
        sentences.append((tokens, tags))
    return sentences


# ---------------------------------------------------------------------------------------------
# Fewer labelled examples, for learning curves.


def _keep_per_class(
    train: list[Example],
    label_names: Sequence[str],
    examples_per_class: int | None,
    seed: int,
    what: str,
) -> list[Example]:
    """Shuffles `train` with `seed`, keeping the first `examples_per_class` of each class."""
    if examples_per_class is not None and (
        isinstance(examples_per_class, bool)
        or not isinstance(examples_per_class, int)
        or examples_per_class < 1
    ):
        raise ValueError(
            f"Expected examples_per_class to be a positive integer or None. "
            f"Received: examples_per_class={examples_per_class!r}"
        )
    kept: list[Example] = []
    for label, label_name in enumerate(label_names):
        members = [example for example in train if example[1] == label]
        if examples_per_class is not None and examples_per_class > len(members):
            raise ValueError(
                f"examples_per_class={examples_per_class} is more than the {len(members)} "
                f"training examples of class {label_name!r} in {what}"
            )
        order = np.random.default_rng([seed, label]).permutation(len(members))
        kept += [members[i] for i in order[:examples_per_class]]
    return [kept[i] for i in np.random.default_rng(seed).permutation(len(kept))]


# ---------------------------------------------------------------------------------------------
# Built-in tasks.


def _balanced(pools: list[list[str]], per_class: int) -> list[str]:
    """At most `per_class` texts, an equal share from each pool, chosen by SHA-256 rank."""
    share = math.ceil(per_class / len(pools))
    chosen = [text for pool in pools for text in sorted(pool, key=_rank)[:share]]
    return sorted(chosen, key=_rank)[:per_class]


def load_classification_task(
    name: str, seed: int = 0, examples_per_class: int | None = None
) -> ClassificationData:
    """Loads a built-in sentence classification task (`TASKS`) made from the parallel corpora.

    A class's sentences are the distinct sentences of its `(corpus, side)` sources; training
    sentences come from the corpora's train splits, dev and test sentences from their dev and
    test splits (`keras_attn.text.corpora.load_corpus`; `synthetic` with its seed 0). Left out:
    texts found under two classes, dev texts that are test texts, training texts that are dev
    or test texts. Dev and test hold `DEV_TEST_PER_CLASS` sentences per class (all there are
    when fewer), an equal share from each source chosen by the SHA-256 of the text: they depend
    neither on `seed` nor on `examples_per_class`. Training keeps every sentence, shuffled by
    `seed`, or `examples_per_class` per class, a seeded draw nested across sizes.

    Args:
        name: a task of `TASKS` (`"source-id"`, `"language-id"`, `"synthetic-language-id"`) or
            its short name in `TASK_ALIASES` (`"source"`, `"language"`, `"synthetic"`).
        seed: seed of the training order and of the `examples_per_class` draw.
        examples_per_class: training examples kept per class, or None for all.

    Returns:
        A `ClassificationData` with the task's class names as `label_names`.

    Raises:
        ValueError: on an unknown task, or `examples_per_class` above a class's training size.
        CorpusNotInstalledError: if a corpus the task needs is not installed.

    Example:

    >>> data = load_classification_task("synthetic", examples_per_class=50)
    >>> data.label_names, len(data.train), len(data.test)
    (('Spanish', 'English'), 100, 1000)
    """
    task = task_name(name)
    if task is None:
        raise ValueError(
            f"Unknown classification task {name!r}. Expected one of: "
            f"{', '.join([*TASKS, *TASK_ALIASES])}"
        )
    classes = TASKS[task]
    splits_of: dict[str, corpora.Splits] = {}
    pools: dict[str, list[list[list[str]]]] = {}  # split -> class -> source -> texts
    for split in ("train", "dev", "test"):
        pools[split] = []
        for sources in classes.values():
            pools[split].append([])
            for corpus, side in sources:
                if corpus not in splits_of:
                    splits_of[corpus] = corpora.load_corpus(corpus)
                column = corpora.SIDES.index(side)
                pools[split][-1].append(sorted({pair[column] for pair in splits_of[corpus][split]}))
    labels_of: dict[str, set[int]] = {}
    for split_pools in pools.values():
        for label, class_pools in enumerate(split_pools):
            for text in (text for pool in class_pools for text in pool):
                labels_of.setdefault(text, set()).add(label)
    ambiguous = {text for text, labels in labels_of.items() if len(labels) > 1}
    held_out = set(ambiguous)  # grows with the test, then the dev texts
    evaluation: dict[str, list[Example]] = {}
    for split in ("test", "dev"):
        evaluation[split] = [
            (text, label)
            for label, class_pools in enumerate(pools[split])
            for text in _balanced(
                [[t for t in pool if t not in held_out] for pool in class_pools],
                DEV_TEST_PER_CLASS,
            )
        ]
        held_out.update(text for text, _ in evaluation[split])
    train = [
        (text, label)
        for label, class_pools in enumerate(pools["train"])
        for text in sorted({text for pool in class_pools for text in pool} - held_out)
    ]
    label_names = tuple(classes)
    return ClassificationData(
        _keep_per_class(train, label_names, examples_per_class, seed, f"task {task!r}"),
        evaluation["dev"],
        evaluation["test"],
        label_names,
    )


# ---------------------------------------------------------------------------------------------
# Entry points.


def _split(items: list, key: Callable[[object], str]) -> dict[str, list]:
    distinct = sorted(set(items))
    return corpora.split_by_hash(distinct, key=key)


def load_classification_data(
    name_or_path: str | os.PathLike, seed: int = 0, examples_per_class: int | None = None
) -> ClassificationData:
    """Loads sentence classification data: a built-in task or a `text TAB label` file.

    A name of `TASKS` or `TASK_ALIASES` loads the task (`load_classification_task`). Anything
    else is read as a file (`read_classification_tsv`): exact duplicates are dropped and the
    examples split by text with `keras_attn.text.corpora.split_by_hash` (dev and test 5 % of the
    distinct texts each, at most 1,000), labels numbered in sorted order of their names.
    Training examples are shuffled by `seed`.

    Args:
        name_or_path: a built-in task name or the path of a `text TAB label` file.
        seed: seed of the training order and of the `examples_per_class` draw.
        examples_per_class: training examples kept per class (a seeded draw, nested across
            sizes for one seed), or None for all; dev and test are not reduced.

    Returns:
        A `ClassificationData`.

    Raises:
        ValueError: on a malformed file (naming the file and line), fewer than 3 distinct
            texts, or `examples_per_class` above a class's training size.
        FileNotFoundError: if the file does not exist.
        CorpusNotInstalledError: if a corpus a built-in task needs is not installed.
    """
    name_or_path = os.fspath(name_or_path)
    if task_name(name_or_path) is not None:
        return load_classification_task(name_or_path, seed, examples_per_class)
    if not _is_path(name_or_path):
        raise ValueError(
            f"Unknown classification data {name_or_path!r}. Expected one of: "
            f"{', '.join([*TASKS, *TASK_ALIASES])} or the path of a text<TAB>label file"
        )
    examples = _split(read_classification_tsv(name_or_path), key=lambda example: example[0])
    label_names = tuple(sorted({label for split in examples.values() for _, label in split}))
    index = {label: i for i, label in enumerate(label_names)}
    numbered = {
        split: [(text, index[label]) for text, label in items] for split, items in examples.items()
    }
    return ClassificationData(
        _keep_per_class(
            numbered["train"], label_names, examples_per_class, seed, str(name_or_path)
        ),
        numbered["dev"],
        numbered["test"],
        label_names,
    )


def load_tagging_task(name: str, seed: int = 0) -> TaggingData:
    """Loads a built-in tagging task (`TAGGING_TASKS`): `synthetic-tags`, English word classes.

    The sentences are the English sides of the `synthetic` corpus (`load_corpus("synthetic")`,
    generator seed 0), as words with the word class the grammar gave each one
    (`keras_attn.text.synthetic.load_tagged_splits`; tags `synthetic.WORD_CLASSES`).
    Dev and test are the corpus' dev and test sentences, train its training sentences; distinct
    sentences only, and an English sentence that two Spanish ones translate to ("tú comes", "usted
    come": "you eat") is kept only in the first of train, test and dev that holds it — so dev and
    test are disjoint from each other and from all the corpus' training text (what a model
    pre-trained on `synthetic` has read). Dev and test do not
    depend on `seed`; training sentences are shuffled by it.

    Args:
        name: a task of `TAGGING_TASKS`.
        seed: seed of the training order.

    Returns:
        A `TaggingData` with `WORD_CLASSES` as `tag_names`.

    Raises:
        ValueError: on an unknown task.

    Example:

    >>> data = load_tagging_task("synthetic-tags")
    >>> data.tag_names[:4], len(data.dev) > 900, len(data.train) > 25000
    (('ADJ', 'ADP', 'ADV', 'AUX'), True, True)
    """
    if name not in TAGGING_TASKS:
        raise ValueError(
            f"Unknown tagging task {name!r}. Expected one of: {', '.join(TAGGING_TASKS)}"
        )
    splits = _synthetic_tags()
    order = np.random.default_rng(seed).permutation(len(splits["train"]))
    return TaggingData(
        [splits["train"][i] for i in order],
        list(splits["dev"]),
        list(splits["test"]),
        synthetic.WORD_CLASSES,
    )


@functools.cache
def _synthetic_tags() -> dict[str, tuple[TaggedSentence, ...]]:
    """The distinct sentences of `synthetic-tags` by split, each in the first of train, test and
    dev that holds it (generated once per process)."""
    tagged = synthetic.load_tagged_splits(seed=0)
    index = {tag: i for i, tag in enumerate(synthetic.WORD_CLASSES)}
    seen: set[tuple[str, ...]] = set()
    splits: dict[str, tuple[TaggedSentence, ...]] = {}
    for split in ("train", "test", "dev"):
        kept = []
        for tokens, tags in tagged[split]:
            if tokens not in seen:
                seen.add(tokens)
                kept.append((tokens, tuple(index[tag] for tag in tags)))
        splits[split] = tuple(kept)
    return splits


def load_tagging_data(name_or_path: str | os.PathLike, seed: int = 0) -> TaggingData:
    """Loads token classification data: a built-in task or a `tokens TAB tags` file.

    A name of `TAGGING_TASKS` loads the task (`load_tagging_task`). Anything else is read as a
    file (`read_tagging_tsv`): exact duplicate sentences are dropped and the sentences split by
    their tokens with `keras_attn.text.corpora.split_by_hash` (dev and test 5 % of the distinct
    token sequences each, at most 1,000); tags are numbered in sorted order of their names.
    Training sentences are shuffled by `seed`.

    Args:
        name_or_path: a built-in task name or the path of a `tokens TAB tags` file.
        seed: seed of the training order.

    Returns:
        A `TaggingData`.

    Raises:
        ValueError: on a malformed file (naming the file and line) or fewer than 3 distinct
            sentences.
        FileNotFoundError: if the file does not exist.
    """
    name_or_path = os.fspath(name_or_path)
    if name_or_path in TAGGING_TASKS:
        return load_tagging_task(name_or_path, seed)
    sentences = _split(read_tagging_tsv(name_or_path), key=lambda sentence: " ".join(sentence[0]))
    tag_names = tuple(
        sorted({tag for split in sentences.values() for _, tags in split for tag in tags})
    )
    index = {tag: i for i, tag in enumerate(tag_names)}
    numbered = {
        split: [(tokens, tuple(index[tag] for tag in tags)) for tokens, tags in items]
        for split, items in sentences.items()
    }
    order = np.random.default_rng(seed).permutation(len(numbered["train"]))
    return TaggingData(
        [numbered["train"][i] for i in order], numbered["dev"], numbered["test"], tag_names
    )
