import hashlib
import json
import re
import statistics

import pytest

from keras_attn.text import synthetic
from keras_attn.text.synthetic import generate_pairs, load_splits


def tokens(text):
    """Words and punctuation marks, each one token."""
    return re.findall(r"\w+|[^\w\s]", text)


def words(text):
    return [t.lower() for t in tokens(text) if t[0].isalnum()]


def test_generation_is_deterministic_from_the_seed():
    first = generate_pairs(500, seed=7)
    assert first == generate_pairs(500, seed=7)
    assert first != generate_pairs(500, seed=8)
    assert generate_pairs(200, seed=7) == first[:200]


@pytest.mark.parametrize(
    "seed, digest",
    [
        (0, "6a99c2d2491f7db5665ac02bb1f510c5fef5e47412668c7c6155edd09a676e31"),
        (7, "a0140912b1202e38382ab297ad95a17d8ecfa81d5c58e2f269e1a1a82e081db1"),
    ],
)
def test_corpus_is_unchanged(seed, digest):
    # Models trained on the corpus (the demo's translator among them) depend on every byte of it:
    # a change to the grammar or to the word tables in keras_attn/text/data/ must be deliberate.
    pairs = generate_pairs(2000, seed=seed)
    text = json.dumps(pairs, ensure_ascii=False).encode()
    assert hashlib.sha256(text).hexdigest() == digest


def test_corpus_size_vocabulary_and_lengths(pairs):
    assert len(pairs) == 30000
    assert len(set(pairs)) == len(pairs)
    assert len({es for es, _ in pairs}) == len(pairs)
    for side in (0, 1):
        assert len({w for pair in pairs for w in words(pair[side])}) >= 300
        lengths = [len(tokens(pair[side])) for pair in pairs]
        assert max(lengths) >= 40
        assert 5 <= statistics.median(lengths) <= 20
        share_5_to_20 = sum(5 <= n <= 20 for n in lengths) / len(lengths)
        share_over_30 = sum(n > 30 for n in lengths) / len(lengths)
        assert share_5_to_20 > 0.8
        assert 0.005 < share_over_30 < 0.1


def test_english_is_a_function_of_the_spanish():
    # Duplicates are kept here: every repeated source must come with the same target.
    grammar = synthetic._Grammar(seed=11)
    targets = {}
    repeats = 0
    for _ in range(20000):
        es, en = grammar.sentence()
        repeats += es in targets
        assert targets.setdefault(es, en) == en, es
    assert repeats > 20


def test_splits_are_disjoint(splits):
    assert [len(splits[name]) for name in ("train", "dev", "test")] == [28000, 1000, 1000]
    sources = [{es for es, _ in splits[name]} for name in ("train", "dev", "test")]
    assert not sources[0] & sources[1]
    assert not sources[0] & sources[2]
    assert not sources[1] & sources[2]


def test_splits_partition_the_generated_pairs():
    splits = load_splits(seed=3, num_pairs=600, dev_size=50, test_size=70)
    assert splits["dev"] + splits["test"] + splits["train"] == generate_pairs(600, seed=3)
    assert [len(splits[name]) for name in ("train", "dev", "test")] == [480, 50, 70]


@pytest.mark.parametrize("dev_size, test_size", [(60, 40), (-1, 10), (10, -1)])
def test_load_splits_rejects_impossible_sizes(dev_size, test_size):
    with pytest.raises(ValueError, match="dev_size"):
        load_splits(num_pairs=100, dev_size=dev_size, test_size=test_size)


def test_casing_and_punctuation(pairs):
    for es, en in pairs[:3000]:
        for text in (es, en):
            assert text[0].isupper() or (text[0] == "¿" and text[1].isupper()), text
            assert text[-1] in ".?", text
            assert not re.search(r" [.,?]|¿ |  ", text), text
        assert es.startswith("¿") == es.endswith("?") == en.endswith("?"), (es, en)


COPULA = re.compile(
    r"^(El|La|Los|Las) (\w+) (no )?(es|son|está|están|era|eran|estaba|estaban) (muy )?(\w+)\.$"
)
EN_COPULA = re.compile(r"^The (\w+) (is|are|was|were) (not )?(very )?(\w+)\.$")


def test_gender_and_number_agreement_in_copula_sentences(pairs):
    checked = 0
    for es, en in pairs:
        match = COPULA.match(es)
        if not match:
            continue
        article, _, neg, verb, _, adjective = match.groups()
        en_match = EN_COPULA.match(en)
        assert en_match, (es, en)
        plural = article in ("Los", "Las")
        assert (verb in ("son", "están", "eran", "estaban")) == plural, es
        assert (en_match.group(2) in ("are", "were")) == plural, (es, en)
        assert bool(neg) == bool(en_match.group(3)), (es, en)
        if adjective[-2:] in ("os", "as") or adjective[-1] in "oa":
            ending = {"El": "o", "La": "a", "Los": "os", "Las": "as"}[article]
            assert adjective.endswith(ending), es
        if plural:
            assert adjective.endswith("s"), es
        else:
            assert not adjective.endswith(("os", "as", "es")), es
        checked += 1
    assert checked > 200


# A few nouns and adjectives with their English forms, to check reordering on real strings.
NOUNS = {
    "gato": "cat",
    "gatos": "cats",
    "casa": "house",
    "casas": "houses",
    "libro": "book",
    "libros": "books",
    "niños": "children",
    "ratones": "mice",
    "mesa": "table",
}
ADJECTIVES = {
    "negro": "black",
    "negros": "black",
    "negra": "black",
    "negras": "black",
    "grande": "big",
    "grandes": "big",
    "pequeño": "small",
    "pequeña": "small",
    "pequeños": "small",
    "pequeñas": "small",
    "viejo": "old",
    "vieja": "old",
    "viejos": "old",
    "viejas": "old",
}


def test_adjectives_follow_the_noun_in_spanish_and_precede_it_in_english(pairs):
    checked = 0
    for es, en in pairs:
        es_words, en_text = words(es), " ".join(words(en))
        for noun, adjective in zip(es_words, es_words[1:], strict=False):
            if noun in NOUNS and adjective in ADJECTIVES:
                assert f"{ADJECTIVES[adjective]} {NOUNS[noun]}" in en_text, (es, en)
                checked += 1
    assert checked > 20


def test_negation_uses_do_support(pairs):
    pattern = re.compile(r"^(Él|Ella) no (\w+) ")
    checked = 0
    for es, en in pairs:
        # "no" in Spanish is always negation; English says "not", or "no" in "there is no".
        assert words(es).count("no") == words(en).count("not") + words(en).count("no"), (es, en)
        match = pattern.match(es)
        if match and words(es).count("no") == 1:
            verb = match.group(2)
            if verb.endswith("rá"):
                expected = ("will not",)
            elif verb.endswith(("o", "ó")) or verb in ("era", "estaba"):
                expected = ("did not", "was not")  # preterite (-ó, tuvo, dijo…) or imperfect
            else:
                expected = ("does not", "is not")
            en_words = en.split()
            assert en_words[0] in ("He", "She"), (es, en)
            assert " ".join(en_words[1:3]) in expected, (es, en)
            checked += 1
    assert checked > 50


def test_questions_use_inversion_and_do_support(pairs):
    starts = {
        "¿Qué": ("What do", "What does", "What did", "What will"),
        "¿Dónde está el": ("Where is the",),
        "¿Dónde están los": ("Where are the",),
        "¿Quién": ("Who",),
        "¿Él": ("Does he", "Did he", "Will he", "Is he", "Was he"),
        "¿Ella": ("Does she", "Did she", "Will she", "Is she", "Was she"),
        "¿Cuántos": ("How many",),
    }
    seen = dict.fromkeys(starts, 0)
    for es, en in pairs:
        for prefix, english in starts.items():
            if es.startswith(prefix + " "):
                assert en.startswith(english), (es, en)
                seen[prefix] += 1
    assert min(seen.values()) > 5, seen


NUMBERS = {"dos": "two", "tres": "three", "diez": "ten", "veinte": "twenty", "cien": "one hundred"}


def test_number_words_agree_with_plural_nouns(pairs):
    checked = 0
    for es, en in pairs:
        es_words, en_text = words(es), " ".join(words(en))
        for number, noun in zip(es_words, es_words[1:], strict=False):
            if number in NUMBERS and noun in NOUNS:
                assert noun.endswith("s")
                # An adjective may come between: "tres gatos negros" → "three black cats".
                pattern = rf"\b{NUMBERS[number]} (\w+ )?{NOUNS[noun]}\b"
                assert re.search(pattern, en_text), (es, en)
                checked += 1
        for article, noun in zip(es_words, es_words[1:], strict=False):
            if article in ("un", "una") and noun in NOUNS:
                assert not noun.endswith("s")
    assert checked > 10


CONJUNCTIONS = {
    "porque": "because",
    "si": "if",
    "aunque": "although",
    "mientras": "while",
    "pero": "but",
    "y": "and",
}


def test_subordinate_clauses_are_translated_and_nest(pairs):
    deepest = 0
    for es, en in pairs:
        es_words, en_words = words(es), words(en)
        for es_conj, en_conj in CONJUNCTIONS.items():
            assert es_words.count(es_conj) == en_words.count(en_conj), (es, en)
        when = es_words.count("cuando") + es_words.count("cuándo")
        assert when == en_words.count("when"), (es, en)
        # "que" (relative or complement) is "that"/"who"; "ese/esa" and "quién" account for
        # the other uses of those English words.
        others = es_words.count("ese") + es_words.count("esa") + es_words.count("quién")
        assert es_words.count("que") == en_words.count("that") + en_words.count("who") - others
        deepest = max(deepest, es_words.count("que"))
    assert deepest >= 3


# Word classes of the English side.


def tagged(sentence):
    return " ".join(f"{token}/{tag}" for token, tag in zip(*sentence, strict=True))


def test_word_classes_of_hand_checked_sentences():
    sentences = synthetic.generate_tagged(400, seed=0)
    expected = {
        3: "That/DET waiter/NOUN is/AUX lazy/ADJ ./PUNCT",
        5: "How/ADV many/DET teachers/NOUN were/AUX there/PRON behind/ADP the/DET chair/NOUN "
        "?/PUNCT",
        11: "What/DET color/NOUN are/AUX few/DET phones/NOUN ?/PUNCT",
        263: "You/PRON fall/VERB and/CCONJ a/DET brown/ADJ turtle/NOUN will/AUX sleep/VERB a/ADV "
        "lot/ADV ./PUNCT",
        344: "Why/ADV does/AUX an/DET elephant/NOUN drink/VERB coffee/NOUN that/PRON is/AUX "
        "not/PART expensive/ADJ ?/PUNCT",
        378: "Did/AUX your/DET mother/NOUN think/VERB that/SCONJ Andrés/PROPN visited/VERB "
        "Pedro/PROPN ?/PUNCT",
        392: "That/DET doctor/NOUN was/AUX on/ADP the/DET open/ADJ bed/NOUN ./PUNCT",
    }
    assert {i: tagged(sentences[i]) for i in expected} == expected


def test_one_class_per_word_of_the_english_side_in_its_order():
    pairs = generate_pairs(2000, seed=3)
    sentences = synthetic.generate_tagged(2000, seed=3)
    classes = {}
    for (_, english), (words_, tags) in zip(pairs, sentences, strict=True):
        assert len(words_) == len(tags) and set(tags) <= set(synthetic.WORD_CLASSES)
        assert words_ == tuple(tokens(english)), english
        for word, tag in zip(words_, tags, strict=True):
            classes.setdefault(word.lower(), set()).add(tag)
    # The grammar, not the spelling, decides: these words take several classes by context.
    assert classes["that"] == {"DET", "PRON", "SCONJ"}
    assert classes["when"] == {"ADV", "SCONJ"} and classes["what"] == {"DET", "PRON"}
    assert classes["open"] == {"ADJ", "VERB"}
    assert classes["."] == classes["?"] == classes[","] == {"PUNCT"}
    assert set().union(*classes.values()) == set(synthetic.WORD_CLASSES)


def test_tagged_splits_follow_the_pair_splits():
    pairs = load_splits(num_pairs=60, dev_size=5, test_size=7, seed=2)
    sentences = synthetic.load_tagged_splits(num_pairs=60, dev_size=5, test_size=7, seed=2)
    assert {name: len(split) for name, split in sentences.items()} == {
        "train": 48, "dev": 5, "test": 7,
    }  # fmt: skip
    for name, split in pairs.items():
        assert [tuple(tokens(english)) for _, english in split] == [
            words_ for words_, _ in sentences[name]
        ]
