import numpy as np
import pytest

from keras_attn.text import augmentation
from keras_attn.text.augmentation import augment, augment_examples, read_mythes
from keras_attn.text.corpora import CorpusNotInstalledError

TABLE = {"quick": ["fast", "speedy", "rapid"], "dog": ["hound"], "lazy": ["idle", "slothful"]}


def write_mythes(path, encoding, entries):
    lines = [encoding]
    for word, meanings in entries:
        lines.append(f"{word}|{len(meanings)}")
        lines += meanings
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    return path


def test_read_mythes_keeps_single_word_synonyms_in_order(tmp_path):
    path = write_mythes(
        tmp_path / "th_es.dat",
        "ISO8859-1",
        [
            (
                "casa",
                ["-|hogar|vivienda|casa de campo", "(noun)|morada|hogar|edificio (generic term)"],
            ),
            ("Niño", ["-|chico|crío|niña (antonym)"]),
            ("a priori", ["-|de antemano"]),
            ("sin sinónimo", ["-|x y"]),
        ],
    )
    table = read_mythes(path)
    assert table == {"casa": ["hogar", "vivienda", "morada"], "niño": ["chico", "crío"]}


def test_augment_replaces_words_by_synonyms_and_keeps_the_rest():
    rng = np.random.default_rng(0)
    text = "The Quick brown dog, lazy as ever."
    for _ in range(50):
        changed = augment(text, TABLE, rng)
        original, new = text.split(" "), changed.split(" ")
        assert len(new) == len(original)
        differing = [(a, b) for a, b in zip(original, new, strict=True) if a != b]
        assert 1 <= len(differing) <= 3
        for before, after in differing:
            word = before.strip(",.").lower()
            assert after.strip(",.").lower() in TABLE[word]
            assert after[0].isupper() == before[0].isupper()
            assert after[len(after.rstrip(",.")) :] == before[len(before.rstrip(",.")) :]
    assert augment("no synonyms here", TABLE, rng) == "no synonyms here"


def test_counts_and_synonym_indices_are_geometric():
    """Zhang et al. (2015): P[r] ~ p^r and P[s] ~ q^s; with p = q = 0.5 half the copies change
    one word, and half the replacements take the first synonym."""
    rng = np.random.default_rng(1)
    text = " ".join(["quick"] * 12)
    replaced, first = [], []
    for _ in range(4000):
        words = augment(text, TABLE, rng).split()
        changed = [w for w in words if w != "quick"]
        replaced.append(len(changed))
        first += [w == "fast" for w in changed]
    counts = np.bincount(replaced, minlength=5)[1:5] / len(replaced)
    np.testing.assert_allclose(counts, [0.5, 0.25, 0.125, 0.0625], atol=0.03)
    assert np.mean(first) == pytest.approx(0.5, abs=0.03)


def test_augment_examples_adds_changed_copies_with_their_labels():
    texts, labels = ["a quick dog", "nothing to change"], [1, 0]
    out_texts, out_labels = augment_examples(texts, labels, TABLE, copies=3, seed=0)
    assert out_texts[:2] == texts and out_labels[:2] == labels
    assert len(out_texts) == 5 and out_labels[2:] == [1, 1, 1]
    assert all(t != "a quick dog" for t in out_texts[2:])


def test_bad_probabilities_and_languages(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="p=1.0"):
        augment("quick", TABLE, np.random.default_rng(0), p=1.0)
    with pytest.raises(ValueError, match="'de'"):
        augmentation.thesaurus_path("de")
    monkeypatch.setattr(augmentation, "corpora_dir", lambda: tmp_path)
    monkeypatch.setattr(augmentation, "SYSTEM_ROOT", tmp_path / "root")
    with pytest.raises(CorpusNotInstalledError, match="make corpora"):
        augmentation.thesaurus_path("en")


@pytest.mark.parametrize(
    "language, word, synonym", [("en", "happy", "glad"), ("es", "casa", "hogar")]
)
def test_the_installed_thesauri(language, word, synonym):
    table = augmentation.load_thesaurus(language)
    assert len(table) > 20_000 and synonym in table[word]
