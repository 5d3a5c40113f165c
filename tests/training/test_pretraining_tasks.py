"""`keras-attn train --model bert` and `--model bart` end to end, on a small ordered corpus.

The corpus stands in for an ordered one (Bible chapters, help pages): `load_monolingual` and
`is_ordered` are replaced by a generator of documents of four five-word sentences, Spanish
words on the source side and English words on the target side, so that every sentence in a
batch can be traced back to its document and position.
"""

import contextlib
import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.models.families import get_family
from keras_attn.text import corpora
from keras_attn.text.denoising import bart_reserved_tokens
from keras_attn.text.masked_lm import BERT_RESERVED_TOKENS, BertTokens
from keras_attn.training.tasks import get_task
from keras_attn.training.trainer import RunDirectory, TrainConfig, read_train_log, train

WORDS = {
    "es": "gato perro casa mesa libro agua sol luna rojo verde come bebe lee mira grande chico",
    "en": "cat dog house table book water sun moon red green eats drinks reads sees big small",
}
SIDE_LANGUAGES = {"source": "es", "target": "en"}
STEPS, EVERY = 8, 4
TINY = dict(
    corpus="synthetic", batch_size=8, vocab_size=200, max_length=32, eval_sentences=12,
    schedule="inverse-sqrt", warmup_steps=2, learning_rate=0.01, checkpoint_every=EVERY,
    mixed_precision="float32",
    options={"num_layers": 1, "d_model": 16, "num_heads": 2, "ff_dim": 32, "dropout": 0.1},
)  # fmt: skip


def ordered_documents(language: str, count: int, seed: int) -> list[list[str]]:
    """`count` documents of four distinct five-word sentences of `language`'s words."""
    rng = np.random.default_rng(seed)
    words = WORDS[language].split()
    seen, documents = set(), []
    while len(documents) < count:
        document = []
        while len(document) < 4:
            sentence = " ".join(rng.choice(words, size=5))
            if sentence not in seen:
                seen.add(sentence)
                document.append(sentence)
        documents.append(document)
    return documents


TEXT = {
    language: {"train": ordered_documents(language, 40, seed), "dev": ordered_documents(
        language, 6, seed + 10)}
    for seed, language in enumerate(("es", "en"))
}  # fmt: skip


def fake_monolingual(names, sides=corpora.SIDES, seed=0):
    sides = [sides] if isinstance(sides, str) else list(sides)
    return {
        split: [
            (SIDE_LANGUAGES[side], document)
            for side in sides
            for document in TEXT[SIDE_LANGUAGES[side]][split]
        ]
        for split in ("train", "dev")
    }


@contextlib.contextmanager
def ordered_corpus():
    """`synthetic` reads as the ordered corpus above while the context is open."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(corpora, "load_monolingual", fake_monolingual)
        patch.setattr(corpora, "is_ordered", lambda name: True)
        yield


def quiet(line: str) -> None:
    pass


def run_training(out, **options) -> dict:
    with ordered_corpus():
        return train(out, TrainConfig(**{**TINY, **options}), progress=False, log=quiet)


def task_plan(run, task_name: str):
    """The training batch plan `train` builds for `run` (its saved config)."""
    config = RunDirectory(run).read_config()
    family = get_family(config.model)
    task = get_task(task_name)
    with ordered_corpus():
        data = task.load_data(config, family)
        return task.plan(RunDirectory(run), config, family, data["train"]), task, data


def checkpoint_values(run) -> dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(str(run / "checkpoints"))
    names = [n for n in reader.get_variable_to_shape_map() if "OBJECT_GRAPH" not in n]
    return {name: reader.get_tensor(name) for name in names if "save_counter" not in name}


def resumed_equals_straight(straight, out, model: str, **options) -> None:
    """Train `out` 4 steps, resume it to 8 and compare it with the 8-step run `straight`."""
    out.mkdir()
    for name in ("config.json", "vocab.txt"):  # the same run, killed before its first step
        shutil.copy(straight / name, out / name)
    for steps in (STEPS // 2, STEPS):
        with ordered_corpus():
            metrics = train(
                out,
                TrainConfig(**{**TINY, "model": model, "steps": steps, **options}),
                resume=True,
                progress=False,
                log=quiet,
            )
        assert len(read_train_log(out / "train_log.tsv")) == steps
    assert metrics["steps_this_session"] == STEPS // 2
    ours, theirs = checkpoint_values(out), checkpoint_values(straight)
    assert sorted(ours) == sorted(theirs)
    losses = [loss for _, loss, _ in read_train_log(straight / "train_log.tsv")]
    assert len(set(losses)) == STEPS  # every step changed the weights: the comparison is fair
    assert ours["step/.ATTRIBUTES/VARIABLE_VALUE"] == STEPS
    for name, value in theirs.items():
        np.testing.assert_allclose(ours[name], value, rtol=1e-6, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(
        np.array(read_train_log(out / "train_log.tsv")),
        np.array(read_train_log(straight / "train_log.tsv")),
        rtol=1e-6,
        atol=1e-7,
    )


# --------------------------------------------------------------------------------------------
# BERT: masked LM + next-sentence prediction.


@pytest.fixture(scope="module")
def bert_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("bert") / "run"
    metrics = run_training(run, model="bert", steps=STEPS)
    return run, metrics


def test_bert_run_writes_its_vocabulary_and_masked_lm_metrics(bert_run):
    run, metrics = bert_run
    vocab = (run / "vocab.txt").read_text().splitlines()
    assert vocab[: len(BERT_RESERVED_TOKENS)] == BERT_RESERVED_TOKENS
    assert set(WORDS["en"].split()) <= set(vocab)  # the target side, whole words
    assert not set(WORDS["es"].split()) & set(vocab)
    assert metrics["steps"] == STEPS
    assert 0 <= metrics["dev_mlm_accuracy"] <= 1
    assert 1 < metrics["dev_mlm_perplexity"] < 2 * len(vocab)  # finite; about uniform at most
    assert 0 <= metrics["dev_nsp_accuracy"] <= 1  # an ordered corpus has next-sentence pairs
    assert metrics["dev_masked_tokens"] > 0
    # 6 dev documents of 4 sentences give 3 pairs each: eval_sentences=12 of those 18 are scored.
    assert metrics["dev_sentences"] == 12
    saved = RunDirectory(run).load_model()
    assert {"mlm_logits", "nsp_logits"} <= set(saved.output)


def sentence_index(run, documents) -> dict[tuple[int, ...], tuple[int, int]]:
    """`{token ids: (document, position)}` of every sentence of `documents`."""
    tokenizer = RunDirectory(run).tokenizer()
    index = {}
    for d, document in enumerate(documents):
        for position, ids in enumerate(tokenizer.tokenize(tf.constant(document)).to_list()):
            index[tuple(ids)] = (d, position)
    assert len(index) == sum(len(document) for document in documents)
    return index


def test_bert_batches_mask_only_ordinary_tokens_of_real_sentence_pairs(bert_run):
    run, _ = bert_run
    plan, _, _ = task_plan(run, "masked_lm")
    tokens = BertTokens.from_vocab(RunDirectory(run).tokenizer().vocab)
    index = sentence_index(run, TEXT["en"]["train"])
    special = np.asarray(tokens.special_ids)
    maskable = chosen = masked = kept = 0
    nsp_labels = []
    for step in range(12):
        features, labels = plan.batch(step)
        inputs, segments, mlm = features["token_ids"], features["segment_ids"], labels["mlm"]
        assert inputs.shape == segments.shape == mlm.shape and inputs.shape[0] == TINY["batch_size"]
        packed = np.where(mlm != 0, mlm, inputs)  # the packed ids, if only labels were changed
        assert not np.isin(mlm[mlm != 0], special).any()  # special tokens are never chosen
        for row in range(len(packed)):
            length = int((packed[row] != 0).sum())
            ids = packed[row, :length]
            assert (packed[row, length:] == 0).all() and (mlm[row, length:] == 0).all()
            seps = np.flatnonzero(ids == tokens.sep_id)
            assert ids[0] == tokens.cls_id and len(seps) == 2 and seps[1] == length - 1
            expected_segments = [0] * (seps[0] + 1) + [1] * (length - seps[0] - 1)
            padding = [0] * (inputs.shape[1] - length)
            assert segments[row].tolist() == expected_segments + padding
            # Unchosen positions show the packed ids: A and B are corpus sentences.
            first = index[tuple(ids[1 : seps[0]].tolist())]
            second = index[tuple(ids[seps[0] + 1 : seps[1]].tolist())]
            nsp = int(labels["nsp"][row])
            nsp_labels.append(nsp)
            if nsp == 1:
                assert second == (first[0], first[1] + 1)
            else:
                assert nsp == 0 and second[0] != first[0]
            maskable += length - 3
            chosen_here = mlm[row] != 0
            chosen += int(chosen_here.sum())
            masked += int((inputs[row][chosen_here] == tokens.mask_id).sum())
            kept += int((inputs[row][chosen_here] == mlm[row][chosen_here]).sum())
            replaced = inputs[row][chosen_here & (inputs[row] != tokens.mask_id)]
            assert not np.isin(replaced, special).any()
    assert set(nsp_labels) == {0, 1}
    assert 0.3 < np.mean(nsp_labels) < 0.7  # a coin per pair: 96 pairs, 4 standard deviations
    # About 1,000 maskable tokens: 15 % chosen (+ about 2 % by the at-least-one-per-row rule),
    # 80 % of them shown as [MASK] and 10 % unchanged; bounds of more than 4 standard deviations.
    assert 0.11 < chosen / maskable < 0.24
    assert 0.68 < masked / chosen < 0.92
    assert 0.02 < kept / chosen < 0.2


def test_bert_batches_are_a_function_of_the_step(bert_run):
    run, _ = bert_run
    plan, _, _ = task_plan(run, "masked_lm")
    again, _, _ = task_plan(run, "masked_lm")  # a resumed run builds its plan anew
    for step in (0, 5, plan.batches_per_epoch + 1):
        (features, labels), (features2, labels2) = plan.batch(step), again.batch(step)
        for a, b in ((features, features2), (labels, labels2)):
            for key in a:
                np.testing.assert_array_equal(a[key], b[key])
    for step in range(1, 4):
        assert not np.array_equal(plan.batch(0)[0]["token_ids"], plan.batch(step)[0]["token_ids"])
        assert not np.array_equal(plan.batch(0)[1]["mlm"], plan.batch(step)[1]["mlm"])


def test_bert_on_an_unordered_corpus_has_no_nsp_labels_and_a_finite_loss(bert_run, tmp_path):
    run, _ = bert_run
    corpus = tmp_path / "pairs.tsv"
    lines = [
        f"{s}\t{t}\n"
        for d1, d2 in zip(TEXT["es"]["train"], TEXT["en"]["train"], strict=True)
        for s, t in zip(d1, d2, strict=True)
    ]
    corpus.write_text("".join(lines))
    config = TrainConfig(**{**TINY, "model": "bert", "corpus": str(corpus)})
    family = get_family("bert")
    task = get_task("masked_lm")
    data = task.load_data(config, family)
    plan = task.plan(RunDirectory(run), config, family, data["train"])
    tokens = BertTokens.from_vocab(RunDirectory(run).tokenizer().vocab)
    features, labels = plan.batch(0)
    assert (labels["nsp"] == -1).all()
    ids = np.where(labels["mlm"] != 0, labels["mlm"], features["token_ids"])
    assert (features["segment_ids"] == 0).all()
    assert ((ids == tokens.sep_id).sum(axis=1) == 1).all()  # [CLS] sentence [SEP]
    model = RunDirectory(run).load_model()
    loss, accuracy = task.loss(labels, model(features, training=False), config)
    assert np.isfinite(float(loss)) and float(loss) > 0 and 0 <= float(accuracy) <= 1


def test_a_resumed_bert_run_equals_the_straight_run(bert_run, tmp_path):
    resumed_equals_straight(bert_run[0], tmp_path / "resumed", "bert")


# --------------------------------------------------------------------------------------------
# mBART: denoising on both sides, a language tag per document.


@pytest.fixture(scope="module")
def mbart_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("mbart") / "run"
    metrics = run_training(run, model="bart", side="both", steps=STEPS)
    return run, metrics


def test_mbart_vocabulary_and_metrics(mbart_run):
    run, metrics = mbart_run
    vocab = (run / "vocab.txt").read_text().splitlines()
    assert vocab[:8] == bart_reserved_tokens(["en", "es"])
    assert vocab[4:8] == ["[MASK]", "[SEP]", "[en]", "[es]"]
    assert set(WORDS["en"].split()) | set(WORDS["es"].split()) <= set(vocab)
    assert 0 <= metrics["dev_token_accuracy"] <= 1
    assert 1 < metrics["dev_perplexity"] < 2 * len(vocab)
    assert metrics["dev_tokens"] > 0


def test_mbart_batches_rebuild_documents_from_tagged_sources(mbart_run):
    run, _ = mbart_run
    plan, _, _ = task_plan(run, "denoising")
    tokenizer = RunDirectory(run).tokenizer()
    vocab = tokenizer.vocab
    start, end, mask, sep = (vocab.index(t) for t in ("[START]", "[END]", "[MASK]", "[SEP]"))
    tags = {"en": vocab.index("[en]"), "es": vocab.index("[es]")}
    sentences = {
        language: sentence_index(run, TEXT[language]["train"]) for language in ("en", "es")
    }
    languages = []
    for step in range(6):
        features, labels = plan.batch(step)
        source, target = features["source_ids"], features["target_ids"]
        assert target.shape == labels.shape
        np.testing.assert_array_equal(target[:, 1:], labels[:, :-1])  # labels = target shifted
        for row in range(len(source)):
            src = source[row][source[row] != 0]
            tgt = target[row][target[row] != 0]
            lab = labels[row][labels[row] != 0]
            assert tgt[0] == start and lab[-1] == end and len(lab) == len(tgt)
            assert src[-2] == end and src[-1] in tags.values()
            language = "en" if src[-1] == tags["en"] else "es"
            languages.append(language)
            # The target is consecutive sentences of one document of that language, each
            # followed by [SEP].
            body = lab[:-1]
            assert body[-1] == sep
            cuts = np.flatnonzero(body == sep)
            pieces = np.split(body, cuts[:-1] + 1)
            found = [sentences[language][tuple(piece[:-1].tolist())] for piece in pieces]
            assert len({d for d, _ in found}) == 1
            positions = [p for _, p in found]
            assert positions == list(range(positions[0], positions[0] + len(positions)))
            # The source is the same document noised: masks, and no tokens of its own.
            assert mask in src or len(src) - 2 != len(body)
            assert set(src[:-2].tolist()) <= set(body.tolist()) | {mask}
    assert set(languages) == {"en", "es"}


def test_a_resumed_mbart_run_equals_the_straight_run(mbart_run, tmp_path):
    resumed_equals_straight(mbart_run[0], tmp_path / "resumed", "bart", side="both")
