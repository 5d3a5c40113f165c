"""A deterministic, grammar-generated Spanish→English parallel corpus.

Every pair comes from one derivation of a small grammar that builds the Spanish and the English
side together, so the English is a function of the Spanish string alone:

- explicit subjects (no pro-drop), no "su", no word with two translations;
- gender and number agreement of articles, determiners, adjectives and verbs;
- adjective–noun reordering ("el gato negro" → "the black cat", "muy" → "very");
- negation with do-support ("no comió" → "did not eat", "no está" → "is not");
- questions with "¿…?" in Spanish and inversion / do-support in English;
- number words agreeing with plural nouns ("tres gatos negros" → "three black cats");
- relative clauses ("que" → "who"/"that"), complement clauses ("dice que" → "says that") and
  adverbial clauses ("porque", "cuando", "si", "aunque", "mientras", "pero", "y"), nestable.

Tenses are present (simple present), preterite (simple past; "ser"/"estar"/"haber" use the
imperfect) and future ("will"). Most sentences have 5–20 tokens; a few per cent, built from nested
clauses, run past 30 and up to about 60 tokens (punctuation counted as tokens).

The words come from the tables in `keras_attn/text/data/` (see `keras_attn.text._lexicon`).
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from keras_attn.text._lexicon import (
    ADJECTIVES,
    ADVERBS,
    CONJUNCTIONS,
    COPULAS,
    DETERMINERS,
    HABER,
    LOCATIONS,
    NAMES,
    NOUNS,
    NUMBERS,
    PRE_ADVERBS,
    PRONOUNS,
    SLOTS,
    TENSES,
    VERBS,
    WORD_CLASSES,
    Noun,
    Word,
    words,
)

__all__ = ["WORD_CLASSES", "generate_pairs", "generate_tagged", "load_splits", "load_tagged_splits"]

# Clause embeddings (relative, complement or adverbial clauses) a sentence may use, with the
# share of sentences drawn with each budget: most sentences get 0–2, a few per cent get 6–8.
_BUDGET_WEIGHTS = {0: 46, 1: 30, 2: 13, 3: 5, 6: 3, 8: 3}

# English words the grammar itself puts in (the lexicon's words carry their class from the tables).
_THERE = Word("there", "PRON")  # existential "there is"
_COMMA = Word(",", "PUNCT")
_HOW_MANY = [Word("how", "ADV"), Word("many", "DET")]


@dataclass
class _NP:
    """A noun phrase built on both sides, with what agreement needs."""

    es: list[str]
    en: list[str]
    slot: str  # Spanish verb slot
    agr: str  # English agreement: "1s", "3s" or "pl"
    gender: str
    plural: bool
    kind: str
    person: bool  # takes "who" and the personal "a"
    noun: Noun | None = None


@dataclass
class _Predicate:
    """A verb phrase: the Spanish words, and the English verb group left open for inversion."""

    es: list[str]  # ["no"]? + finite verb (+ everything after it)
    en_verb: str  # "lex" (do-support) or "be" (conjugated by `_en_verb_group`)
    en_forms: tuple[str, str, str] | None  # base, 3rd singular, past of a "lex" verb
    en_pre: list[str]  # adverb between auxiliary and verb ("always"), affirmative only
    en_rest: list[str]  # complements after the verb
    tense: str
    negated: bool


def _fix_articles(words: list[str]) -> list[str]:
    """English "a" becomes "an" before a vowel-initial word (the lexicon has no "a university")."""
    out = list(words)
    for i in range(len(out) - 1):
        if out[i] == "a" and out[i + 1][0] in "aeiou":
            out[i] = Word("an", "DET")
    return out


def _join(words: list[str]) -> str:
    """Joins word tokens into text: capital first letter, no space before .,?! or after ¿¡."""
    text = ""
    for word in words:
        if not text or word in ".,?!" or text[-1] in "¿¡":
            text += word
        else:
            text += " " + word
    for i, char in enumerate(text):
        if char.isalpha():
            return text[:i] + char.upper() + text[i + 1 :]
    return text


def _en_verb_group(pred: _Predicate, agr: str) -> tuple[list[str], list[str]]:
    """English verb group split around the subject: (before subject, after subject) in questions.

    For a statement the two parts are concatenated (`before + after`) right after the subject.
    Lexical verbs take do-support whenever negated or questioned; "be" inverts itself.
    """
    tense, neg = pred.tense, pred.negated
    not_ = [Word("not", "PART")] if neg else []
    if pred.en_verb == "be":
        if tense == "fut":
            return [Word("will", "AUX")], not_ + [Word("be", "AUX")]
        if tense == "pres":
            form = {"1s": "am", "3s": "is"}.get(agr, "are")
        else:
            form = "was" if agr in ("1s", "3s") else "were"
        return [Word(form, "AUX")], not_
    base = pred.en_forms[0]
    if tense == "fut":
        return [Word("will", "AUX")], not_ + pred.en_pre + [base]
    if tense == "past":
        return [Word("did", "AUX")], not_ + pred.en_pre + [base]
    return [Word("does" if agr == "3s" else "do", "AUX")], not_ + pred.en_pre + [base]


def _en_statement_verb(pred: _Predicate, agr: str) -> list[str]:
    """English verb group of a statement (no inversion; do-support only under negation)."""
    if pred.en_verb == "lex" and not pred.negated and pred.tense != "fut":
        base, third, past = pred.en_forms
        form = past if pred.tense == "past" else third if agr == "3s" else base
        return pred.en_pre + [form]
    before, after = _en_verb_group(pred, agr)
    return before + after


class _Grammar:
    """Samples one sentence pair at a time from a seeded random stream."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.budget = 0  # clause embeddings still allowed in the current sentence
        self.noun_lists: dict[str, list[Noun]] = {}
        self.kind_adjectives = {k: [a for a in ADJECTIVES if k in a.kinds] for k in "PATSFDL"}
        self.object_nouns = {
            verb: frozenset(self.nouns_for(verb.objects)) for verb in VERBS if verb.frame == "trans"
        }

    # ---- small helpers -------------------------------------------------------------------

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def spend(self, p: float) -> bool:
        """Uses one clause embedding from the budget with probability `p`.

        Sentences drawn with a large budget (the long tail) spend it more eagerly.
        """
        if self.budget >= 4:
            p = max(p, 0.8)
        if self.budget > 0 and self.chance(p):
            self.budget -= 1
            return True
        return False

    def nouns_for(self, spec: str) -> list[Noun]:
        """Nouns of the kinds in `spec` (letters), with the tag `spec`, or ("markL") either."""
        if spec not in self.noun_lists:
            if spec in ("read", "open", "surf", "mark"):
                nouns = [n for n in NOUNS if spec in n.tags]
            elif spec == "markL":
                nouns = [n for n in NOUNS if "mark" in n.tags or n.kind == "L"]
            else:
                nouns = [n for n in NOUNS if n.kind in spec]
            self.noun_lists[spec] = nouns
        return self.noun_lists[spec]

    # ---- noun phrases ---------------------------------------------------------------------

    def noun_phrase(
        self, spec: str, role: str = "subj", plural: bool | None = None, allow_rel: bool = True
    ) -> _NP:
        """A determiner + noun + optional adjective + optional relative clause.

        `role` is "subj", "obj", "loc" (after a preposition), "exist" (after "hay") or
        "bare_pl" (no determiner, plural: "¿Cuántos gatos…").
        """
        nouns = self.nouns_for(spec)
        if plural:
            nouns = [n for n in nouns if n.es_pl is not None]
        noun = self.rng.choice(nouns)
        if plural is None:
            plural = noun.es_pl is not None and self.chance(0.35)
        plural = plural and noun.es_pl is not None
        gender = noun.gender
        es_noun = noun.es_pl if plural else noun.es_sg
        en_noun = noun.en_pl if plural else noun.en_sg
        es_det, en_det = self.determiner(noun, plural, role)
        es_adj: list[str] = []
        en_adj: list[str] = []
        if self.chance(0.3 if role != "loc" else 0.15):
            adjectives = self.kind_adjectives[noun.kind]
            adjective = self.rng.choice(adjectives)
            es_adj = [adjective.form(gender, plural)]
            en_adj = [adjective.en]
            if self.chance(0.12):
                es_adj, en_adj = ["muy"] + es_adj, [Word("very", "ADV")] + en_adj
        np = _NP(
            es=es_det + [es_noun] + es_adj,
            en=en_det + en_adj + [en_noun],
            slot="3p" if plural else "3s",
            agr="pl" if plural else "3s",
            gender=gender,
            plural=plural,
            kind=noun.kind,
            person=noun.kind == "P",
            noun=noun,
        )
        if (
            allow_rel
            and role in ("subj", "obj", "loc")
            and self.spend(0.45 if role != "loc" else 0.2)
        ):
            es_rel, en_rel = self.relative_clause(np)
            np.es += es_rel
            np.en += en_rel
        return np

    def determiner(self, noun: Noun, plural: bool, role: str) -> tuple[list[str], list[str]]:
        idx = (noun.gender == "f") + 2 * plural
        rng = self.rng
        if role == "bare_pl":
            return [], []
        if role == "exist" and noun.mass:
            return [], []
        if noun.mass:
            choices = ["def"] * 6 + ["this", "that", "my", "your", "our"]
            if role in ("obj", "exist"):
                choices += ["bare"] * 8
        elif role == "exist":
            choices = ["indef"] * 4
            if plural:
                choices += ["num"] * 4 + ["many", "few", "several", "bare"]
        elif "fam" in noun.tags:
            choices = ["def"] * 2 + ["my"] * 3 + ["your", "our"]
        elif role == "loc":
            choices = ["def"] * 8 + ["this", "that", "my", "our"]
        elif plural:
            choices = ["def"] * 8 + ["indef", "this", "that", "my", "your", "our", "many", "few"]
            choices += ["several", "all"] + ["num"] * 5
            if role == "obj":
                choices += ["bare"] * 3
        else:
            choices = ["def"] * 10 + ["indef"] * 5 + ["this", "that", "my", "your", "our"] * 2
        if "nopos" in noun.tags:
            choices = [c for c in choices if c not in ("my", "your", "our")]
        choice = rng.choice(choices)
        if choice == "bare":
            return [], []
        if choice == "num":
            es_num, en_num = rng.choice(NUMBERS)
            if role != "exist" and self.chance(0.2):
                pre = rng.choice(["def", "this"] if "nopos" in noun.tags else ["def", "this", "my"])
                forms, _, en_pl = DETERMINERS[pre]
                return [forms[idx], es_num], [en_pl] + en_num
            return [es_num], list(en_num)
        forms, en_sg, en_pl = DETERMINERS[choice]
        return forms[idx].split(), words(en_pl if plural else en_sg)

    def subject(self, kinds: str, allow_rel: bool = True, core: bool = True) -> _NP:
        """A subject: a pronoun or a name (people only) or a noun phrase.

        First and second person pronouns only come with `core` verbs, which keeps the number of
        rare Spanish verb forms small.
        """
        r = self.rng.random()
        if "P" in kinds and r < 0.22:
            pronouns = PRONOUNS if core else [p for p in PRONOUNS if p[1] in ("3s", "3p")]
            es, slot, en, agr, gender = self.rng.choice(pronouns)
            gender = gender or self.rng.choice("mf")
            plural = slot in ("1p", "3p")
            return _NP([es], [en], slot, agr, gender, plural, "P", True)
        if "P" in kinds and r < 0.36:
            gender = self.rng.choice("mf")
            name = self.rng.choice(NAMES[gender])
            return _NP([name], [name], "3s", "3s", gender, False, "P", True)
        weights = {"P": 5, "A": 4, "T": 2, "S": 1, "F": 1, "D": 1, "L": 1}
        pool = [k for k in kinds for _ in range(weights[k])]
        return self.noun_phrase(self.rng.choice(pool), "subj", allow_rel=allow_rel)

    def object_phrase(self, spec: str) -> tuple[list[str], list[str]]:
        """An object noun phrase; people and animals take the personal "a" ("al" before "el")."""
        if "P" in spec and self.chance(0.25):
            gender = self.rng.choice("mf")
            name = self.rng.choice(NAMES[gender])
            np = _NP([name], [name], "3s", "3s", gender, False, "P", True)
        else:
            np = self.noun_phrase(spec, "obj")
        if np.kind in "PA":
            return _contract(["a"], np.es), np.en
        return np.es, np.en

    def location(self) -> tuple[list[str], list[str]]:
        es_prep, en_prep, spec = self.rng.choice(LOCATIONS)
        np = self.noun_phrase(spec, "loc", plural=self.chance(0.15))
        return _contract(es_prep.split(), np.es), words(en_prep) + np.en

    # ---- clauses --------------------------------------------------------------------------

    def relative_clause(self, head: _NP) -> tuple[list[str], list[str]]:
        """ "que" + predicate (subject relative) or "que" + subject + verb (object relative)."""
        tense = self.tense()
        object_verbs = [v for v, nouns in self.object_nouns.items() if head.noun in nouns]
        if not head.person and object_verbs and self.chance(0.35):
            verb = self.rng.choice(object_verbs)
            subj = self.subject(verb.subjects, allow_rel=False, core=verb.core)
            slot_ok = (tense, subj.slot) in verb.forms
            tense = tense if slot_ok else "pres"
            neg = self.chance(0.15)
            pred = _Predicate(
                (["no"] if neg else []) + [verb.forms[tense, subj.slot]],
                "lex",
                verb.en,
                [],
                [],
                tense,
                neg,
            )
            es = ["que"] + subj.es + pred.es
            en = [Word("that", "PRON")] + subj.en + _en_statement_verb(pred, subj.agr)
            return es, en
        pred = self.predicate(head, tense, allow_comp=False)
        es = ["que"] + pred.es
        relative = Word("who" if head.person else "that", "PRON")
        en = [relative] + _en_statement_verb(pred, head.agr) + pred.en_rest
        return es, en

    def tense(self) -> str:
        return self.rng.choices(TENSES, weights=(45, 35, 20))[0]

    def predicate(
        self,
        subj: _NP,
        tense: str,
        *,
        neg: bool | None = None,
        allow_comp: bool = True,
        allow_pre_adverb: bool = True,
        frames: tuple[str, ...] = ("intr", "trans", "adj", "loc", "comp"),
    ) -> _Predicate:
        """A verb phrase agreeing with `subj`: intransitive, transitive, copula or "que" clause."""
        if neg is None:
            neg = self.chance(0.2)
        weights = {"intr": 3, "trans": 5, "adj": 3, "loc": 1.2, "comp": 1.2}
        if subj.kind not in "PA":
            weights["intr"] = 0.3
        if not allow_comp or subj.kind != "P" or not self.budget:
            weights["comp"] = 0
        pool = [f for f in frames if weights[f] > 0]
        frame = self.rng.choices(pool, weights=[weights[f] for f in pool])[0]
        if frame == "comp":
            self.budget -= 1
        not_ = ["no"] if neg else []
        if frame in ("adj", "loc"):
            if frame == "adj":
                adjective = self.rng.choice(self.kind_adjectives[subj.kind])
                es_rest = [adjective.form(subj.gender, subj.plural)]
                en_rest = [adjective.en]
                if self.chance(0.15):
                    es_rest, en_rest = ["muy"] + es_rest, [Word("very", "ADV")] + en_rest
                copula = adjective.copula
            else:
                es_rest, en_rest = self.location()
                copula = "estar"
            verb_es = COPULAS[copula][tense][SLOTS.index(subj.slot)]
            return _Predicate(not_ + [verb_es] + es_rest, "be", None, [], en_rest, tense, neg)

        verbs = [
            v
            for v in VERBS
            if v.frame == frame
            and subj.kind in v.subjects
            and (v.core or subj.slot in ("3s", "3p"))
        ]
        if not verbs:
            return self.predicate(subj, tense, neg=neg, frames=("adj",))
        verb = self.rng.choice(verbs)
        if (tense, subj.slot) not in verb.forms:
            tense = "pres"
        es_pre: list[str] = []
        en_pre: list[str] = []
        if frame == "comp":
            neg, not_ = False, []
        elif allow_pre_adverb and not neg and tense != "fut" and self.chance(0.06):
            es_adv, en_adv = self.rng.choice(PRE_ADVERBS)
            es_pre, en_pre = [es_adv], [en_adv]
        es_rest: list[str] = []
        en_rest: list[str] = []
        if frame == "trans":
            es_obj, en_obj = self.object_phrase(verb.objects)
            es_rest += es_obj
            en_rest += en_obj
        elif frame == "comp":
            clause_tense = "past" if tense == "past" else self.tense()
            es_clause, en_clause = self.statement(clause_tense)
            es_rest += ["que"] + es_clause
            en_rest += [Word("that", "SCONJ")] + en_clause
        if verb.live:
            np = self.noun_phrase("L", "loc")
            es_rest += _contract(["en"], np.es)
            en_rest += [Word("in", "ADP")] + np.en
        elif verb.loc and self.chance(0.2):
            es_loc, en_loc = self.location()
            es_rest += es_loc
            en_rest += en_loc
        elif frame != "comp" and self.chance(0.15):
            options = [
                a for a in ADVERBS if tense in a[2].split() and (frame == "intr" or a[0] != "mucho")
            ]
            es_adv, en_adv, _ = self.rng.choice(options)
            es_rest.append(es_adv)
            en_rest += words(en_adv)
        return _Predicate(
            not_ + es_pre + [verb.forms[tense, subj.slot]] + es_rest,
            "lex",
            verb.en,
            en_pre,
            en_rest,
            tense,
            neg,
        )

    def statement(self, tense: str) -> tuple[list[str], list[str]]:
        """A declarative clause: subject + predicate (or an existential "hay" clause)."""
        if self.chance(0.1):
            return self.existential(tense, neg=self.chance(0.2))
        kinds = self.rng.choices(["P", "PA", "PATSFDL"], weights=(5, 3, 2))[0]
        subj = self.subject(kinds)
        pred = self.predicate(subj, tense)
        en = subj.en + _en_statement_verb(pred, subj.agr) + pred.en_rest
        return subj.es + pred.es, en

    def existential(self, tense: str, neg: bool) -> tuple[list[str], list[str]]:
        """ "Hay tres gatos en el jardín" → "There are three cats in the garden"."""
        es_loc, en_loc = self.location()
        if neg:
            spec = self.rng.choice(["PATS", "FD"])
            np = self.noun_phrase(spec, "bare_pl", plural=spec != "FD")
            agr = "pl" if np.plural else "3s"
            be = _en_be_statement(tense, agr)
            en = [_THERE] + be + [Word("no", "DET")] + np.en + en_loc
            return ["no", HABER[tense]] + np.es + es_loc, en
        np = self.noun_phrase("PATSFD", "exist")
        be = _en_be_statement(tense, np.agr)
        return [HABER[tense]] + np.es + es_loc, [_THERE] + be + np.en + en_loc

    # ---- sentences ------------------------------------------------------------------------

    def sentence(self) -> tuple[str, str]:
        es, en = self.sentence_words()
        return _join(es), _join(en)

    def sentence_words(self) -> tuple[list[str], list[Word]]:
        """One sentence pair as words, punctuation included, before casing and joining."""
        budgets, weights = zip(*_BUDGET_WEIGHTS.items(), strict=True)
        self.budget = self.rng.choices(budgets, weights=weights)[0]
        r = self.rng.random()
        if r < 0.62:
            es, en = self.compound_statement()
            return es + ["."], _fix_articles(en + [Word(".", "PUNCT")])
        if r < 0.78:
            es, en = self.yes_no_question()
        else:
            es, en = self.wh_question()
        return ["¿"] + es + ["?"], _fix_articles(en + [Word("?", "PUNCT")])

    def compound_statement(self) -> tuple[list[str], list[str]]:
        """A statement, optionally joined to more clauses by conjunctions.

        "cuando" keeps both clauses in one tense (present or past), "si" takes a present clause
        with a present or future main clause, "mientras" is present only: the tenses where
        Spanish keeps the indicative.
        """
        tense = self.tense()
        if not self.spend(0.55):
            return self.statement(tense)
        conj = self.rng.choice(list(CONJUNCTIONS))
        if conj == "cuando":
            tense = self.rng.choice(["pres", "past"])
            sub_tense = tense
        elif conj == "si":
            tense = self.rng.choice(["pres", "fut"])
            sub_tense = "pres"
        elif conj == "mientras":
            tense = sub_tense = "pres"
        else:
            sub_tense = self.tense()
        es_main, en_main = self.statement(tense)
        es_sub, en_sub = self.statement(sub_tense)
        if conj in ("cuando", "si", "aunque", "mientras") and self.chance(0.4):
            es = [conj] + es_sub + [","] + es_main
            en = [CONJUNCTIONS[conj]] + en_sub + [_COMMA] + en_main
        else:
            comma = [_COMMA] if conj == "pero" else []
            es = es_main + comma + [conj] + es_sub
            en = en_main + comma + [CONJUNCTIONS[conj]] + en_sub
        while self.spend(0.5):
            conj = self.rng.choice(["porque", "pero", "y"])
            comma = [_COMMA] if conj == "pero" else []
            es_more, en_more = self.statement(self.tense())
            es += comma + [conj] + es_more
            en += comma + [CONJUNCTIONS[conj]] + en_more
        return es, en

    def yes_no_question(self) -> tuple[list[str], list[str]]:
        """ "¿El gato come pescado?" → "Does the cat eat fish?" (also "hay" → "is there")."""
        tense = self.tense()
        neg = self.chance(0.12)
        if self.chance(0.1):
            es_loc, en_loc = self.location()
            np = self.noun_phrase("PATSFD", "exist")
            be = _en_be_statement(tense, np.agr)
            en = be[:1] + [_THERE] + be[1:] + np.en + en_loc
            return [HABER[tense]] + np.es + es_loc, en
        kinds = self.rng.choices(["P", "PA", "PATSFDL"], weights=(5, 3, 2))[0]
        # No relative clause on the subject: the auxiliary in front depends on the verb after it.
        subj = self.subject(kinds, allow_rel=False)
        pred = self.predicate(subj, tense, neg=neg, allow_pre_adverb=False)
        before, after = _en_verb_group(pred, subj.agr)
        es = subj.es + pred.es
        en = before + subj.en + after + pred.en_rest
        if self.spend(0.3):
            conj = self.rng.choice(["porque", "cuando"])
            if tense == "fut":
                conj = "porque"
            en_conj = CONJUNCTIONS[conj]
            es_sub, en_sub = self.statement(tense if conj == "cuando" else self.tense())
            es += [conj] + es_sub
            en += [en_conj] + en_sub
        return es, en

    def wh_question(self) -> tuple[list[str], list[str]]:
        """Questions with qué, quién, dónde, cuándo, por qué, cuántos and de qué color."""
        kind = self.rng.choices(
            ["que", "quien", "donde", "cuando", "porque", "cuantos", "color"],
            weights=(5, 4, 4, 3, 3, 3, 1.5),
        )[0]
        tense = self.tense()
        if kind == "quien":
            head = _NP([], [], "3s", "3s", "m", False, "P", True)
            pred = self.predicate(head, tense, neg=self.chance(0.12), allow_pre_adverb=False)
            en = [Word("who", "PRON")] + _en_statement_verb(pred, "3s") + pred.en_rest
            return ["quién"] + pred.es, en
        if kind == "cuantos":
            return self.how_many(tense)
        if kind == "color":
            subj = self.noun_phrase("AT", "subj", allow_rel=False)
            verb_es = COPULAS["ser"][tense][SLOTS.index(subj.slot)]
            pred = _Predicate([verb_es], "be", None, [], [], tense, False)
            before, after = _en_verb_group(pred, subj.agr)
            es = ["de", "qué", "color", verb_es] + subj.es
            what = [Word("what", "DET"), Word("color", "NOUN")]
            return es, what + before + subj.en + after
        if kind == "donde":
            subj = self.subject(self.rng.choice(["P", "PA", "PAT"]), allow_rel=False)
            if self.chance(0.5) or subj.kind not in "PA":
                verb_es = COPULAS["estar"][tense][SLOTS.index(subj.slot)]
                pred = _Predicate([verb_es], "be", None, [], [], tense, False)
            else:
                verb = self.rng.choice(
                    [
                        v
                        for v in VERBS
                        if v.frame == "intr"
                        and (v.loc or v.live)
                        and subj.kind in v.subjects
                        and (v.core or subj.slot in ("3s", "3p"))
                    ]
                )
                if (tense, subj.slot) not in verb.forms:
                    tense = "pres"
                pred = _Predicate(
                    [verb.forms[tense, subj.slot]], "lex", verb.en, [], [], tense, False
                )
            before, after = _en_verb_group(pred, subj.agr)
            en = [Word("where", "ADV")] + before + subj.en + after
            return ["dónde"] + pred.es + subj.es, en
        if kind == "que":
            verbs = [
                v for v, nouns in self.object_nouns.items() if any(n.kind in "TSFDL" for n in nouns)
            ]
            verb = self.rng.choice(verbs)
            subj = self.subject(verb.subjects, allow_rel=False, core=verb.core)
            if (tense, subj.slot) not in verb.forms:
                tense = "pres"
            pred = _Predicate([verb.forms[tense, subj.slot]], "lex", verb.en, [], [], tense, False)
            before, after = _en_verb_group(pred, subj.agr)
            en = [Word("what", "PRON")] + before + subj.en + after
            return ["qué"] + pred.es + subj.es, en
        # "cuándo" and "por qué": verb first, then subject, then complements ("¿Por qué come
        # Ana pan?"); a predicate adjective goes before the subject ("¿Por qué está triste Ana?")
        # so that it cannot be read as an adjective of the subject.
        subj = self.subject(self.rng.choices(["P", "PA"], weights=(3, 1))[0], allow_rel=False)
        neg = kind == "porque" and self.chance(0.25)
        frames = ("intr", "trans") if kind == "cuando" else ("intr", "trans", "adj")
        pred = self.predicate(subj, tense, neg=neg, allow_pre_adverb=False, frames=frames)
        before, after = _en_verb_group(pred, subj.agr)
        split = len(pred.es) if pred.en_verb == "be" else 2 if neg else 1
        es_wh = ["cuándo"] if kind == "cuando" else ["por", "qué"]
        en_wh = [Word("when" if kind == "cuando" else "why", "ADV")]
        es = es_wh + pred.es[:split] + subj.es + pred.es[split:]
        return es, en_wh + before + subj.en + after + pred.en_rest

    def how_many(self, tense: str) -> tuple[list[str], list[str]]:
        """ "¿Cuántos gatos hay en el jardín?" / "¿Cuántos libros tiene Ana?"."""
        if self.chance(0.5):
            np = self.noun_phrase("PATS", "bare_pl", plural=True)
            es_q = ["cuántos" if np.gender == "m" else "cuántas"]
            es_loc, en_loc = self.location()
            be = _en_be_statement(tense, "pl")
            en = _HOW_MANY + np.en + be[:1] + [_THERE] + be[1:] + en_loc
            return es_q + np.es + [HABER[tense]] + es_loc, en
        verbs = [v for v in VERBS if v.frame == "trans" and set(v.objects) & set("ATS")]
        verb = self.rng.choice(verbs)
        spec = "".join(k for k in verb.objects if k in "ATS")
        np = self.noun_phrase(spec, "bare_pl", plural=True)
        subj = self.subject(verb.subjects, allow_rel=False, core=verb.core)
        if (tense, subj.slot) not in verb.forms:
            tense = "pres"
        pred = _Predicate([verb.forms[tense, subj.slot]], "lex", verb.en, [], [], tense, False)
        before, after = _en_verb_group(pred, subj.agr)
        es_q = ["cuántos" if np.gender == "m" else "cuántas"]
        es = es_q + np.es + pred.es + subj.es
        return es, _HOW_MANY + np.en + before + subj.en + after


def _en_be_statement(tense: str, agr: str) -> list[str]:
    if tense == "fut":
        return [Word("will", "AUX"), Word("be", "AUX")]
    if tense == "pres":
        return [Word("is" if agr == "3s" else "are", "AUX")]
    return [Word("was" if agr == "3s" else "were", "AUX")]


def _contract(prep: list[str], np_es: list[str]) -> list[str]:
    """Preposition + noun phrase with "a el" → "al" and "de el" → "del"."""
    if prep and prep[-1] in ("a", "de") and np_es and np_es[0] == "el":
        return prep[:-1] + [prep[-1] + "l"] + np_es[1:]
    return prep + np_es


def generate_pairs(num_pairs: int = 30000, seed: int = 0) -> list[tuple[str, str]]:
    """Generates distinct (Spanish, English) sentence pairs from the grammar.

    The same `seed` always gives the same list, and a shorter list is a prefix of a longer one
    with the same seed. Sources are distinct; the English side is a function of the Spanish.

    Args:
        num_pairs: how many pairs to return.
        seed: seed of the random stream driving the grammar.

    Returns:
        A list of `(spanish, english)` strings with natural casing and punctuation.

    Example:

    >>> pairs = generate_pairs(3, seed=0)
    >>> len(pairs), len({es for es, _ in pairs})
    (3, 3)
    >>> pairs == generate_pairs(3, seed=0)
    True
    """
    return [(_join(es), _join(en)) for es, en in _derivations(num_pairs, seed)]


def _derivations(num_pairs: int, seed: int) -> tuple[tuple[tuple[str, ...], tuple[Word, ...]], ...]:
    """The words of the first `num_pairs` sentence pairs with distinct Spanish sides."""
    if num_pairs < 0:
        raise ValueError(f"Expected num_pairs >= 0. Received: num_pairs={num_pairs}")
    return _cached_derivations(num_pairs, seed)


# The grammar is pure Python (about 4 s for the 30,000 pairs of `load_splits`): a process that
# trains several runs on the same corpus (a test session, an experiment) derives it once.
@functools.lru_cache(maxsize=4)
def _cached_derivations(
    num_pairs: int, seed: int
) -> tuple[tuple[tuple[str, ...], tuple[Word, ...]], ...]:
    grammar = _Grammar(seed)
    seen: set[str] = set()
    derivations = []
    while len(derivations) < num_pairs:
        es, en = grammar.sentence_words()
        text = _join(es)
        if text not in seen:
            seen.add(text)
            derivations.append((tuple(es), tuple(en)))
    return tuple(derivations)


def generate_tagged(
    num_pairs: int = 30000, seed: int = 0
) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The English sides of `generate_pairs(num_pairs, seed)` as words, each with its word class.

    The class of a word is the one the grammar gave it when it put the word in the sentence, so
    it is right by construction, context included: "that" is a determiner ("that cat"), a
    relative pronoun ("the cat that runs") or a subordinating conjunction ("says that"), "open"
    an adjective or a verb. The classes are those of `WORD_CLASSES`, the Universal Dependencies
    tags (Petrov et al., 2012, arXiv:1104.2086): the words of a multi-word entry of the lexicon
    share its class ("in front of" ADP ADP ADP, "a lot" ADV ADV). Punctuation is a token of its
    own, tagged PUNCT; the first word is capitalized as in the sentence.

    Args:
        num_pairs: how many sentences, as in `generate_pairs`.
        seed: seed of the random stream driving the grammar.

    Returns:
        A list of `(tokens, tags)`, the i-th the English side of `generate_pairs`' i-th pair.

    Example:

    >>> tokens, tags = generate_tagged(1, seed=0)[0]
    >>> len(tokens) == len(tags), tokens[-1] in ".?", tags[-1]
    (True, True, 'PUNCT')
    """
    tagged = []
    for _, en in _derivations(num_pairs, seed):
        tokens = [str(word) for word in en]
        tokens[0] = tokens[0][0].upper() + tokens[0][1:]
        tagged.append((tuple(tokens), tuple(word.tag for word in en)))
    return tagged


def load_splits(
    seed: int = 0, num_pairs: int = 30000, dev_size: int = 1000, test_size: int = 1000
) -> dict[str, list[tuple[str, str]]]:
    """Generates the corpus and splits it into disjoint train/dev/test lists.

    Sources are distinct across the whole corpus, so no Spanish sentence is in two splits. The
    pairs are in generation order, which is already random: dev takes the first `dev_size`, test
    the next `test_size`, train the rest.

    Args:
        seed: seed of the generator.
        num_pairs: total number of pairs over the three splits.
        dev_size: number of dev pairs.
        test_size: number of test pairs.

    Returns:
        `{"train": [...], "dev": [...], "test": [...]}` of `(spanish, english)` pairs.

    Example:

    >>> splits = load_splits(num_pairs=50, dev_size=5, test_size=5)
    >>> {name: len(pairs) for name, pairs in splits.items()}
    {'train': 40, 'dev': 5, 'test': 5}
    """
    _check_sizes(num_pairs, dev_size, test_size)
    return _split(generate_pairs(num_pairs, seed), dev_size, test_size)


def load_tagged_splits(
    seed: int = 0, num_pairs: int = 30000, dev_size: int = 1000, test_size: int = 1000
) -> dict[str, list[tuple[tuple[str, ...], tuple[str, ...]]]]:
    """The English sides of `load_splits`' pairs with their word classes (`generate_tagged`).

    Split as `load_splits` splits the pairs: the i-th sentence of a split is the English side of
    the i-th pair of the same split. Two splits may hold the same English sentence, translating
    two Spanish ones ("tú comes", "usted come": "you eat").

    Args:
        seed: seed of the generator.
        num_pairs: total number of sentences over the three splits.
        dev_size: number of dev sentences.
        test_size: number of test sentences.

    Returns:
        `{"train": [...], "dev": [...], "test": [...]}` of `(tokens, tags)`.
    """
    _check_sizes(num_pairs, dev_size, test_size)
    return _split(generate_tagged(num_pairs, seed), dev_size, test_size)


def _check_sizes(num_pairs: int, dev_size: int, test_size: int) -> None:
    if dev_size < 0 or test_size < 0 or dev_size + test_size >= num_pairs:
        raise ValueError(
            "Expected 0 <= dev_size + test_size < num_pairs. Received: "
            f"num_pairs={num_pairs}, dev_size={dev_size}, test_size={test_size}"
        )


def _split(items: list, dev_size: int, test_size: int) -> dict[str, list]:
    return {
        "train": items[dev_size + test_size :],
        "dev": items[:dev_size],
        "test": items[dev_size : dev_size + test_size],
    }
