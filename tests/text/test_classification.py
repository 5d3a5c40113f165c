import functools
from collections import Counter

import pytest

from keras_attn.text import classification, corpora, synthetic
from keras_attn.text.classification import (
    TAGGING_TASKS,
    TASK_ALIASES,
    TASKS,
    load_classification_data,
    load_classification_task,
    load_tagging_data,
    load_tagging_task,
    read_classification_tsv,
    read_tagging_tsv,
    task_name,
)


def write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding))
    return path


def texts(examples):
    return {text for text, _ in examples}


def per_class(examples):
    return dict(sorted(Counter(label for _, label in examples).items()))


# ---------------------------------------------------------------------------------------------
# Built-in tasks, on small stand-in corpora with the real corpora's names.


def fake_corpus(source_prefix, target_prefix, sizes=(60, 12, 12)):
    splits, start = {}, 0
    for split, size in zip(("train", "dev", "test"), sizes, strict=True):
        splits[split] = [
            (f"{source_prefix} {i}.", f"{target_prefix} {i}.") for i in range(start, start + size)
        ]
        start += size
    return splits


@pytest.fixture
def fake_corpora(monkeypatch):
    """ding/bible/help/synthetic stand-ins; 'Open.' is in two English corpora (train), 'Ja.' in
    the German and a Spanish corpus, 'Amen.' in Bible train and help test, 'Shared.' in
    dictionary dev and Bible test."""
    fakes = {
        "ding-de-en": fake_corpus("Satz", "Sentence"),
        "bible-es-en": fake_corpus("Versículo", "Verse", sizes=(80, 12, 12)),
        "libreoffice-es-en": fake_corpus("Párrafo", "Paragraph", sizes=(70, 12, 12)),
        "synthetic": fake_corpus("Frase", "Phrase"),
    }
    fakes["ding-de-en"]["train"] += [("Ja.", "Open.")]
    fakes["bible-es-en"]["train"] += [("Ja.", "Amen.")]
    fakes["libreoffice-es-en"]["train"] += [("Abrir.", "Open.")]
    fakes["libreoffice-es-en"]["test"] += [("Amén.", "Amen.")]
    fakes["ding-de-en"]["dev"] += [("Geteilt.", "Shared.")]
    fakes["bible-es-en"]["test"] += [("Compartido.", "Shared.")]
    loaded = []

    def load_corpus(name, seed=0):
        loaded.append(name)
        return fakes[name]

    monkeypatch.setattr(corpora, "load_corpus", load_corpus)
    return loaded


def test_task_names_and_label_sets(fake_corpora):
    assert {alias: task_name(alias) for alias in TASK_ALIASES} == TASK_ALIASES
    assert task_name("source-id") == "source-id" and task_name("ding-de-en") is None
    expected = {
        "source-id": ("dictionary", "Bible", "help"),
        "language-id": ("German", "English", "Spanish"),
        "synthetic-language-id": ("Spanish", "English"),
    }
    for name, labels in expected.items():
        assert load_classification_task(name).label_names == labels
        assert tuple(TASKS[name]) == labels
    assert load_classification_data("language") == load_classification_task("language-id")
    with pytest.raises(ValueError) as info:
        load_classification_task("topic")
    assert str(info.value) == (
        "Unknown classification task 'topic'. Expected one of: source-id, language-id, "
        "synthetic-language-id, source, language, synthetic"
    )


def test_source_id_labels_sentences_by_corpus_and_split(fake_corpora):
    data = load_classification_task("source-id")
    prefixes = {"Sentence": 0, "Verse": 1, "Paragraph": 2}
    for examples in (data.train, data.dev, data.test):
        assert all(label == prefixes[text.split()[0]] for text, label in examples)
    # 'Open.' (dictionary and help) and 'Amen.' (Bible and help) name two classes: left out.
    assert not {"Open.", "Amen."} & texts(data.train + data.dev + data.test)
    assert per_class(data.train) == {0: 60, 1: 80, 2: 70}
    assert per_class(data.dev) == per_class(data.test) == {0: 12, 1: 12, 2: 12}
    # Each corpus's train, dev and test sentences are numbered in that order (fake_corpus).
    for prefix in prefixes:
        numbers = [
            [int(text.split()[1][:-1]) for text, _ in examples if text.startswith(prefix)]
            for examples in (data.train, data.dev, data.test)
        ]
        assert max(numbers[0]) < min(numbers[1]) and max(numbers[1]) < min(numbers[2])
    assert sorted(set(fake_corpora)) == ["bible-es-en", "ding-de-en", "libreoffice-es-en"]


def test_language_id_takes_an_equal_share_of_each_source(fake_corpora, monkeypatch):
    monkeypatch.setattr(classification, "DEV_TEST_PER_CLASS", 6)
    data = load_classification_task("language-id")
    assert per_class(data.dev) == per_class(data.test) == {0: 6, 1: 6, 2: 6}
    english = Counter(text.split()[0] for text, label in data.test if label == 1)
    assert english == {"Sentence": 2, "Verse": 2, "Paragraph": 2}
    spanish = Counter(text.split()[0] for text, label in data.dev if label == 2)
    assert spanish == {"Versículo": 3, "Párrafo": 3}
    # 'Ja.' is German and Spanish: left out. 'Open.' is English twice: kept once.
    train = texts(data.train)
    assert "Ja." not in train and "Open." in train
    # 'Amen.' is English in help's test split: not trained on when it is a test sentence.
    assert ("Amen." in texts(data.test)) != ("Amen." in train)
    assert not train & texts(data.dev + data.test)
    # Dev and test are chosen by the text's hash: the same for every seed.
    other = load_classification_task("language-id", seed=3)
    assert (other.dev, other.test) == (data.dev, data.test)
    assert other.train != data.train and sorted(other.train) == sorted(data.train)


def test_a_text_is_in_one_split_only(fake_corpora):
    data = load_classification_task("language-id")
    assert "Shared." in texts(data.test) and "Shared." not in texts(data.dev)
    assert "Amen." in texts(data.test) and "Amen." not in texts(data.train)
    assert per_class(data.dev) == {0: 13, 1: 12 + 12 + 12, 2: 12 + 12}
    source = load_classification_task("source-id")  # 'Shared.' is dictionary and Bible there
    assert "Shared." not in texts(source.train + source.dev + source.test)


def test_examples_per_class_is_a_seeded_nested_draw(fake_corpora):
    full = load_classification_task("source-id", seed=1)
    small = load_classification_task("source-id", seed=1, examples_per_class=5)
    larger = load_classification_task("source-id", seed=1, examples_per_class=20)
    assert per_class(small.train) == {0: 5, 1: 5, 2: 5}
    assert per_class(larger.train) == {0: 20, 1: 20, 2: 20}
    assert set(small.train) < set(larger.train) < set(full.train)
    assert (small.dev, small.test) == (full.dev, full.test)
    assert load_classification_task("source-id", seed=1, examples_per_class=5) == small
    assert set(load_classification_task("source-id", seed=2, examples_per_class=5).train) != set(
        small.train
    )
    assert per_class(load_classification_task("source-id", examples_per_class=60).train) == {
        0: 60,
        1: 60,
        2: 60,
    }
    with pytest.raises(ValueError) as info:
        load_classification_task("source-id", examples_per_class=61)
    assert str(info.value) == (
        "examples_per_class=61 is more than the 60 training examples of class 'dictionary' in "
        "task 'source-id'"
    )
    for bad in (0, -3, 2.5, True):
        with pytest.raises(
            ValueError, match="Expected examples_per_class to be a positive integer"
        ):
            load_classification_task("source-id", examples_per_class=bad)


def test_synthetic_task_reads_the_generated_corpus():
    data = load_classification_task("synthetic", examples_per_class=100)
    splits = corpora.load_corpus("synthetic")
    for split, examples in (("train", data.train), ("dev", data.dev), ("test", data.test)):
        for column, label in ((0, 0), (1, 1)):
            side = {pair[column] for pair in splits[split]}
            assert {text for text, k in examples if k == label} <= side
    assert per_class(data.train) == {0: 100, 1: 100}
    assert per_class(data.dev) == per_class(data.test) == {0: 500, 1: 500}


def test_synthetic_tags_splits_are_disjoint_fixed_and_shuffled_by_the_seed():
    data = load_tagging_data("synthetic-tags", seed=0)
    other = load_tagging_task("synthetic-tags", seed=1)
    assert data.tag_names == other.tag_names == synthetic.WORD_CLASSES
    assert list(TAGGING_TASKS) == ["synthetic-tags"]
    # Dev and test do not depend on the seed; train is the same sentences in another order.
    assert (data.dev, data.test) == (other.dev, other.test)
    assert data.train != other.train and sorted(data.train) == sorted(other.train)
    assert load_tagging_task("synthetic-tags", seed=0) == data
    splits = {
        name: [tokens for tokens, _ in getattr(data, name)] for name in ("train", "dev", "test")
    }
    for name, sentences in splits.items():
        assert len(set(sentences)) == len(sentences), name
    assert not set(splits["dev"]) & set(splits["test"])
    assert not (set(splits["dev"]) | set(splits["test"])) & set(splits["train"])
    # Nearly all of the corpus' dev and test sentences; none that its training text holds, which
    # is what a model pre-trained on `synthetic` read.
    assert 950 <= len(data.dev) <= 1000 and 950 <= len(data.test) <= 1000
    pretraining_text = {tokens for tokens, _ in synthetic.load_tagged_splits()["train"]}
    assert not (set(splits["dev"]) | set(splits["test"])) & pretraining_text
    for tokens, tags in data.train[:50] + data.dev[:50]:
        assert len(tokens) == len(tags) and all(0 <= tag < len(data.tag_names) for tag in tags)
    with pytest.raises(ValueError, match="Unknown tagging task 'tags'"):
        load_tagging_task("tags")


@pytest.fixture(scope="module")
def real_corpora_read_once():
    """`corpora.load_corpus` reads each installed corpus once for both real tasks (5-30 s each);
    any other corpus is loaded as usual."""
    load = corpora.load_corpus
    cached = functools.cache(load)

    def load_once(name, seed=0):
        return cached(name) if name in corpora._CORPORA and seed == 0 else load(name, seed)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(corpora, "load_corpus", load_once)
        yield


@pytest.mark.slow
@pytest.mark.parametrize("name", ["source-id", "language-id"])
def test_real_tasks(name, real_corpora_read_once):
    for corpus in ("ding-de-en", "bible-es-en", "libreoffice-es-en"):
        if corpora._CORPORA[corpus].locate() is None:
            pytest.skip(f"{corpus} is not installed")
    data = load_classification_task(name, examples_per_class=1000)
    assert per_class(data.train) == {0: 1000, 1: 1000, 2: 1000}
    assert per_class(data.dev) == per_class(data.test) == {0: 500, 1: 500, 2: 500}
    assert not texts(data.train) & texts(data.dev + data.test)


# ---------------------------------------------------------------------------------------------
# text TAB label files.


def test_classification_tsv_is_read_split_by_text_and_numbered(tmp_path):
    lines = ["# a comment", ""] + [
        f"frase  número {i}\t{'pos' if i % 3 else 'neg'}" for i in range(200)
    ]
    path = write(tmp_path / "labels.tsv", "\n".join(lines + lines[2:12]))  # 10 exact duplicates
    examples = read_classification_tsv(path)
    assert len(examples) == 210 and examples[0] == ("frase número 0", "neg")
    data = load_classification_data(str(path))
    assert data.label_names == ("neg", "pos")
    assert (len(data.train), len(data.dev), len(data.test)) == (180, 10, 10)
    everything = data.train + data.dev + data.test
    assert sorted(everything) == sorted(
        (f"frase número {i}", 1 if i % 3 else 0) for i in range(200)
    )
    split = corpora.split_by_hash(sorted(set(examples)), key=lambda example: example[0])
    assert texts(data.dev) == texts(split["dev"]) and texts(data.test) == texts(split["test"])
    assert load_classification_data(path, seed=4).dev == data.dev
    few = load_classification_data(path, seed=4, examples_per_class=7)
    assert per_class(few.train) == {0: 7, 1: 7} and few.test == data.test
    with pytest.raises(ValueError, match="more than the .* training examples of class 'neg' in "):
        load_classification_data(path, examples_per_class=100)


@pytest.mark.parametrize(
    "line,message",
    [
        ("just text", "expected text<TAB>label, got a line without a tab: 'just text'"),
        ("a\tb\tc", "expected text<TAB>label, got 3 columns: 'a\\tb\\tc'"),
        ("  \tpos", "empty text: '  \\tpos'"),
        ("some text\t ", "empty label: 'some text\\t '"),
    ],
)
def test_classification_tsv_errors_name_the_line(tmp_path, line, message):
    path = write(tmp_path / "bad.tsv", f"good one\tpos\n\n{line}\n")
    with pytest.raises(ValueError) as info:
        read_classification_tsv(path)
    assert str(info.value) == f"{path}:3: {message}"


def test_classification_data_name_errors(tmp_path):
    with pytest.raises(
        ValueError, match="Unknown classification data 'topic'. Expected one of: source-id"
    ):
        load_classification_data("topic")
    with pytest.raises(FileNotFoundError, match="classification file not found: .*missing.tsv"):
        load_classification_data(str(tmp_path / "missing.tsv"))


# ---------------------------------------------------------------------------------------------
# tokens TAB tags files.


def test_tagging_tsv_is_read_split_and_numbered(tmp_path):
    lines = [f"Juan {i} vive en Madrid\tB-PER O O O B-LOC" for i in range(60)]
    lines += ["Ana  trabaja\tB-PER   O"]
    path = write(tmp_path / "tags.tsv", "\n".join(lines + lines[:5]))
    sentences = read_tagging_tsv(path)
    assert sentences[-6] == (("Ana", "trabaja"), ("B-PER", "O"))
    data = load_tagging_data(path)
    assert data.tag_names == ("B-LOC", "B-PER", "O")
    assert (len(data.train), len(data.dev), len(data.test)) == (55, 3, 3)
    everything = data.train + data.dev + data.test
    assert ((("Ana", "trabaja"), (1, 2))) in everything
    assert (("Juan", "7", "vive", "en", "Madrid"), (1, 2, 2, 2, 0)) in everything
    other = load_tagging_data(path, seed=1)
    assert (other.dev, other.test) == (data.dev, data.test) and other.train != data.train
    assert sorted(other.train) == sorted(data.train)


@pytest.mark.parametrize(
    "line,message",
    [
        ("Juan vive", "expected tokens<TAB>tags, got a line without a tab: 'Juan vive'"),
        (
            "Juan vive\tB-PER",
            "expected one tag per token, got 2 tokens and 1 tags: 'Juan vive\\tB-PER'",
        ),
        ("Juan\tB-PER O", "expected one tag per token, got 1 tokens and 2 tags: 'Juan\\tB-PER O'"),
        (" \tO", "no tokens: ' \\tO'"),
    ],
)
def test_tagging_tsv_errors_name_the_line(tmp_path, line, message):
    path = write(tmp_path / "bad.tsv", f"Ana\tB-PER\n{line}\n")
    with pytest.raises(ValueError) as info:
        read_tagging_tsv(path)
    assert str(info.value) == f"{path}:2: {message}"
