"""`keras-attn train` for the classifier and tagger families, on generated TSV files.

Sentence labels: whether a sentence names an animal or a thing. Token tags: `NUM` for a
number, `ANIMAL` for an animal, `O` for any other word (the tokenizer folds case, so the tags
depend on the words, not on their spelling). Both are learnt in a few dozen steps.
"""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.errors import ConfigError
from keras_attn.formats import RunDirectory as Run
from keras_attn.models.families import get_family
from keras_attn.text import synthetic
from keras_attn.text.classification import load_classification_data
from keras_attn.training.data import pad
from keras_attn.training.tasks import get_task
from keras_attn.training.tasks.language_model import lm_positions
from keras_attn.training.trainer import RunDirectory, TrainConfig, train

ANIMALS = "cat dog bird fish horse cow sheep goat".split()
THINGS = "table chair book lamp door cup spoon window".split()
FILLERS = "the a big small red green sees has likes near old new".split()
TRANSFORMER = {"num_layers": 1, "d_model": 32, "num_heads": 2, "ff_dim": 64}
TINY = dict(
    batch_size=16, vocab_size=150, max_length=24, eval_sentences=500, warmup_steps=5,
    learning_rate=0.01, checkpoint_every=100, mixed_precision="float32", options=TRANSFORMER,
)  # fmt: skip


def quiet(line: str) -> None:
    pass


def labelled_sentences(count: int, seed: int) -> list[tuple[str, str]]:
    """Distinct six-word sentences, each naming an animal or a thing (its label)."""
    rng = np.random.default_rng(seed)
    seen = {}
    while len(seen) < count:
        label = ("animal", "thing")[int(rng.integers(2))]
        noun = rng.choice(ANIMALS if label == "animal" else THINGS)
        words = [*rng.choice(FILLERS, size=5)]
        words.insert(int(rng.integers(6)), noun)
        seen.setdefault(" ".join(words), label)
    return list(seen.items())


def tagged_sentences(count: int, seed: int) -> list[tuple[list[str], list[str]]]:
    """Distinct sentences of 4 to 8 words: numbers (`NUM`), animals (`ANIMAL`), fillers (`O`)."""
    rng = np.random.default_rng(seed)
    seen = {}
    while len(seen) < count:
        words, tags = [], []
        for _ in range(int(rng.integers(4, 9))):
            kind = rng.random()
            if kind < 0.25:
                words.append(str(int(rng.integers(0, 100_000))))
                tags.append("NUM")
            elif kind < 0.5:
                words.append(str(rng.choice(ANIMALS)))
                tags.append("ANIMAL")
            else:
                words.append(str(rng.choice(FILLERS + THINGS)))
                tags.append("O")
        seen.setdefault(" ".join(words), tags)
    return [(text.split(), tags) for text, tags in seen.items()]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("data")
    labelled = folder / "labelled.tsv"
    labelled.write_text("".join(f"{t}\t{label}\n" for t, label in labelled_sentences(1000, 0)))
    tagged = folder / "tagged.tsv"
    lines = [f"{' '.join(words)}\t{' '.join(tags)}\n" for words, tags in tagged_sentences(1000, 0)]
    tagged.write_text("".join(lines))
    pairs = folder / "pairs.tsv"  # for a language model
    pairs.write_text("".join(f"{t}\t{t}\n" for t, _ in labelled_sentences(300, 1)))
    return {"labelled": str(labelled), "tagged": str(tagged), "pairs": str(pairs)}


@pytest.fixture(scope="module")
def text_cnn_run(tmp_path_factory, files):
    run = tmp_path_factory.mktemp("text_cnn") / "run"
    config = TrainConfig(
        model="text-cnn", corpus=files["labelled"], steps=60,
        options={"embedding_dim": 16, "dropout": 0.1},
        **{k: v for k, v in TINY.items() if k != "options"},
    )  # fmt: skip
    metrics = train(run, config, progress=False, log=quiet)
    return run, metrics


def test_text_cnn_trains_from_scratch_with_labels_and_dev_and_test_accuracy(text_cnn_run):
    run, metrics = text_cnn_run
    assert (run / "labels.txt").read_text() == "animal\nthing\n"
    assert not (run / "init_from.json").exists()
    # 1,000 distinct sentences: dev and test are 5 % each.
    assert metrics["dev_sentences"] == 50
    # Measured over seeds 0-4: dev and test accuracy 1.0 after 60 steps (0.78-1.0 after 30);
    # chance is about 0.5.
    assert metrics["dev_accuracy"] >= 0.95 and metrics["test_accuracy"] >= 0.95
    saved = json.loads((run / "metrics.json").read_text())
    assert saved["dev_accuracy"] == metrics["dev_accuracy"]
    # The saved model scores the same on the dev split, fed as [START] tokens [END].
    data = load_classification_data(RunDirectory(run).read_config().corpus, seed=0)
    tokenizer = RunDirectory(run).tokenizer()
    ids = tokenizer.tokenize(tf.constant([text for text, _ in data.dev])).to_list()
    rows = pad([np.array([tokenizer.start_id, *row, tokenizer.end_id]) for row in ids])
    guesses = np.asarray(RunDirectory(run).load_model()(rows)).argmax(-1)
    accuracy = np.mean(guesses == np.array([label for _, label in data.dev]))
    assert metrics["dev_accuracy"] == round(float(accuracy), 4)


def test_classification_batches_hold_the_texts_and_their_labels(text_cnn_run, files):
    run = RunDirectory(text_cnn_run[0])
    config = run.read_config()
    family = get_family(config.model)
    task = get_task(family.task)
    data = task.load_data(config, family)
    plan = task.plan(run, config, family, data["train"])
    tokenizer = run.tokenizer()
    labels = {text: ("animal", "thing").index(name) for text, name in labelled_sentences(1000, 0)}
    texts = []
    for step in range(plan.batches_per_epoch):
        ids, batch_labels = plan.batch(step)
        for row, label in zip(ids, batch_labels, strict=True):
            row = row[row != 0]
            assert row[0] == tokenizer.start_id and row[-1] == tokenizer.end_id
            text = tokenizer.detokenize(tf.constant([row])).numpy()[0].decode()
            assert labels[text] == label
            texts.append(text)
    # One pass: every training sentence once (but the remainder of a partial batch).
    assert len(set(texts)) == len(texts) == plan.batches_per_epoch * config.batch_size
    assert set(texts) <= {text for text, _ in data["train"]}
    assert len(data["train"]) - len(texts) < config.batch_size


def test_examples_per_class_keeps_n_training_sentences_per_class(text_cnn_run, files):
    run, _ = text_cnn_run
    config = dataclasses.replace(
        RunDirectory(run).read_config(), examples_per_class=7, batch_size=7
    )
    family = get_family("text-cnn")
    task = get_task(family.task)
    data = task.load_data(config, family)
    everything = task.load_data(dataclasses.replace(config, examples_per_class=None), family)
    labels = [label for _, label in data["train"]]
    assert sorted(labels) == [0] * 7 + [1] * 7
    assert set(data["train"]) <= set(everything["train"])
    assert (data["dev"], data["test"]) == (everything["dev"], everything["test"])
    plan = task.plan(RunDirectory(run), config, family, data["train"])
    assert plan.num_examples == 14 and plan.batches_per_epoch == 2
    rows = np.concatenate([plan.batch(step)[1] for step in range(2)])
    assert sorted(rows.tolist()) == sorted(labels)  # one pass: every kept sentence once


def test_classifier_flags_of_other_tasks_are_config_errors(files, tmp_path):
    cases = (
        (dict(model="transformer", examples_per_class=5), {"examples_per_class", "model"}),
        # A tagged sentence has no one class: --train-examples limits a tagger's sentences.
        (dict(model="bert-tagger", examples_per_class=5), {"examples_per_class", "model"}),
        (dict(model="bert-classifier", side="both"), {"side", "model"}),
        (dict(model="text-cnn", mask_rate=0.2), {"mask_rate", "model"}),
        (dict(model="bert-classifier", noises="text_infilling"), {"noises", "model"}),
    )
    for options, fields in cases:
        (name,) = fields - {"model"}
        with pytest.raises(ConfigError, match=f"{name} does not apply") as caught:
            TrainConfig(**options).validate()
        assert set(caught.value.fields) == fields
    out = tmp_path / "out"
    too_many = TrainConfig(model="text-cnn", corpus=files["labelled"], examples_per_class=10_000)
    with pytest.raises(ConfigError, match="examples_per_class=10000 is more than") as caught:
        train(out, too_many, progress=False, log=quiet)
    assert caught.value.fields == ("corpus",)
    assert not out.exists()


def test_gpt_classifier_positions_follow_the_language_model_it_starts_from(files, tmp_path):
    lm = tmp_path / "gpt"
    language_model = TrainConfig(
        model="gpt", corpus=files["pairs"], steps=1, **{**TINY, "max_length": 16}
    )
    train(lm, language_model, progress=False, log=quiet)
    run = tmp_path / "classifier"
    config = TrainConfig(model="gpt-classifier", corpus=files["labelled"], init_from=str(lm),
                         steps=1, **{**TINY, "options": {k: v for k, v in TRANSFORMER.items()
                                                         if k != "d_model"}})  # fmt: skip
    train(run, config, progress=False, log=quiet)
    report = json.loads((run / "init_from.json").read_text())
    assert report["loaded"] == ["embedding", "decoder"] and report["new"] == ["classifier"]
    model = RunDirectory(run).load_model()
    positions = model.get_layer("embedding").weights[1].shape[0]
    assert positions == lm_positions(TrainConfig(max_length=16)) == 145
    # From scratch, the classifier's own max_length sets them.
    saved = dataclasses.replace(RunDirectory(run).read_config(), init_from=None)
    family = get_family("gpt-classifier")
    scratch = get_task(family.task).build_model(Run(run), saved, family)
    assert scratch.get_layer("embedding").weights[1].shape[0] == lm_positions(saved) == 153


# --------------------------------------------------------------------------------------------
# Tagging.


@pytest.fixture(scope="module")
def tagger_runs(tmp_path_factory, files):
    runs = []
    for seed in (0, 1):
        run = tmp_path_factory.mktemp(f"tagger{seed}") / "run"
        config = TrainConfig(
            model="bert-tagger", corpus=files["tagged"], steps=40, seed=seed, **TINY
        )
        runs.append((run, train(run, config, progress=False, log=quiet)))
    return runs


def test_bert_tagger_learns_word_classes_in_a_few_dozen_steps(tagger_runs):
    for run, metrics in tagger_runs:
        assert (run / "labels.txt").read_text() == "ANIMAL\nNUM\nO\n"
        # Measured over seeds 0-4: dev and test tag accuracy 1.0 after 40 steps; the majority
        # tag (O) alone scores about 0.5.
        assert metrics["dev_accuracy"] >= 0.95, metrics
        assert metrics["test_accuracy"] >= 0.95, metrics


def test_bart_tagger_learns_word_classes_in_a_few_dozen_steps(tmp_path, files):
    """The same task for BART's token classification (decoder states; Lewis et al., 2019).
    Measured: seed 0, dev and test tag accuracy 1.0 after 40 steps."""
    config = TrainConfig(model="bart-tagger", corpus=files["tagged"], steps=40, seed=0, **TINY)
    metrics = train(tmp_path / "run", config, progress=False, log=quiet)
    assert (tmp_path / "run" / "labels.txt").read_text() == "ANIMAL\nNUM\nO\n"
    assert metrics["dev_accuracy"] >= 0.95 and metrics["test_accuracy"] >= 0.95, metrics


def test_tagger_labels_only_the_first_piece_of_each_word(tagger_runs, files):
    run = RunDirectory(tagger_runs[0][0])
    config = run.read_config()
    family = get_family(config.model)
    task = get_task(family.task)
    data = task.load_data(config, family)
    plan = task.plan(run, config, family, data["train"])
    vocab = run.tokenizer().vocab
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    tag_ids = {name: i + 1 for i, name in enumerate(data["labels"])}
    sentences = {" ".join(words): tags for words, tags in tagged_sentences(1000, 0)}
    pieces_seen = 0
    for step in range(4):
        features, labels = plan.batch(step)
        ids = features["token_ids"]
        assert (features["segment_ids"] == 0).all() and labels.shape == ids.shape
        for row in range(len(ids)):
            length = int((ids[row] != 0).sum())
            tokens = [vocab[i] for i in ids[row, :length]]
            assert ids[row, 0] == cls and ids[row, length - 1] == sep
            assert labels[row, 0] == 0 and labels[row, length - 1] == 0
            assert (labels[row, length:] == 0).all()
            labelled = np.flatnonzero(labels[row] != 0)
            # A labelled position starts a word; the pieces after it, up to the next labelled
            # position, are its continuation pieces.
            assert all(not tokens[i].startswith("##") for i in labelled)
            words = [
                "".join(t.removeprefix("##") for t in tokens[start:end])
                for start, end in zip(labelled, [*labelled[1:], length - 1], strict=True)
            ]
            tags = sentences[" ".join(words)]
            assert labels[row, labelled].tolist() == [tag_ids[tag] for tag in tags]
            pieces_seen += sum(t.startswith("##") for t in tokens)
    assert pieces_seen > 20  # numbers split into several pieces: the rule is exercised


@pytest.mark.parametrize("model", ["bert-tagger", "bart-tagger"])
def test_taggers_train_on_the_built_in_synthetic_tags(model, tmp_path):
    """`--corpus synthetic-tags` (word classes of the generated English) needs no file; the
    first `train_examples` of its shuffled training sentences are the labelled budget."""
    config = TrainConfig(
        model=model, corpus="synthetic-tags", steps=2, train_examples=32,
        **{**TINY, "eval_sentences": 10, "max_length": 32},
    )  # fmt: skip
    metrics = train(tmp_path / "run", config, progress=False, log=quiet)
    assert (tmp_path / "run" / "labels.txt").read_text().split() == list(synthetic.WORD_CLASSES)
    assert (metrics["steps"], metrics["training_examples"], metrics["dev_sentences"]) == (2, 32, 10)
    assert 0.0 <= metrics["dev_accuracy"] <= 1.0 and 0.0 <= metrics["test_accuracy"] <= 1.0
