"""`--init-from RUN` and `--vocab-from RUN`, and the encoder optimizer of `bertsum`.

A tiny BERT is pre-trained on a generated corpus; a classifier, a BertSum translator and a
from-scratch baseline start from it. One Adam step moves a weight by at most the learning rate
(its first update is `lr · m̂ / (√v̂ + ε)` with `|m̂| = √v̂`), which tells a loaded layer from a
freshly initialised one after training.
"""

import dataclasses
import json
import math
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.errors import ConfigError, PathNotFoundError
from keras_attn.models.bert.bertsum import BERTSUM_ENCODER_LAYERS
from keras_attn.models.families import get_family
from keras_attn.training.initialization import initialize_from
from keras_attn.training.tasks import get_task
from keras_attn.training.trainer import RunDirectory, TrainConfig, _optimizer_groups, train

ANIMALS = "cat dog bird fish horse cow".split()
THINGS = "table chair book lamp door cup".split()
FILLERS = "the a big small red green sees has likes near".split()
LEARNING_RATE = 0.01
TINY = dict(
    batch_size=8, vocab_size=200, max_length=24, eval_sentences=16, warmup_steps=0,
    schedule="cosine", learning_rate=LEARNING_RATE, checkpoint_every=50, mixed_precision="float32",
    options={"num_layers": 1, "d_model": 16, "num_heads": 2, "ff_dim": 32},
)  # fmt: skip
BACKBONE = ["embedding", "segment_embedding", "embedding_norm", "encoder", "pooler"]


def quiet(line: str) -> None:
    pass


def labelled_sentences(count: int, seed: int) -> list[tuple[str, str]]:
    """Distinct five-word sentences, each naming an animal or a thing (its label)."""
    rng = np.random.default_rng(seed)
    seen = {}
    while len(seen) < count:
        label = ("animal", "thing")[int(rng.integers(2))]
        noun = rng.choice(ANIMALS if label == "animal" else THINGS)
        words = [*rng.choice(FILLERS, size=4)]
        words.insert(int(rng.integers(5)), noun)
        seen.setdefault(" ".join(words), label)
    return list(seen.items())


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict:
    """A translation-style TSV (pre-training reads its target side) and a text TAB label TSV."""
    folder = tmp_path_factory.mktemp("corpora")
    sentences = labelled_sentences(240, seed=0)
    (folder / "pairs.tsv").write_text("".join(f"{text}\t{text}\n" for text, _ in sentences))
    (folder / "labelled.tsv").write_text("".join(f"{t}\t{label}\n" for t, label in sentences))
    return {"pairs": str(folder / "pairs.tsv"), "labelled": str(folder / "labelled.tsv")}


@pytest.fixture(scope="module")
def bert_run(tmp_path_factory, corpora):
    run = tmp_path_factory.mktemp("bert") / "run"
    config = TrainConfig(model="bert", corpus=corpora["pairs"], steps=2, **TINY)
    train(run, config, progress=False, log=quiet)
    return run


def fine_tuning(**options) -> TrainConfig:
    """A one-step fine-tuning config that leaves the architecture to the init run: `options`
    (fields, and the family's `options`) give the rest."""
    base = {k: v for k, v in TINY.items() if k != "options"}
    return TrainConfig(**{**base, "steps": 1, **options})


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory, corpora, bert_run):
    run = tmp_path_factory.mktemp("classifier") / "run"
    config = fine_tuning(
        model="bert-classifier", corpus=corpora["labelled"], init_from=str(bert_run)
    )
    metrics = train(run, config, progress=False, log=quiet)
    return run, metrics


def layer_weights(model, name: str) -> list[np.ndarray]:
    return [np.asarray(w) for w in model.get_layer(name).get_weights()]


def test_a_classifier_from_a_bert_run_loads_its_backbone_and_vocabulary(bert_run, classifier_run):
    run, metrics = classifier_run
    report = json.loads((run / "init_from.json").read_text())
    assert report["init_from"] == str(bert_run)
    assert report["loaded"] == BACKBONE
    assert report["new"] == ["classifier"]
    assert report["unused"] == ["mlm_transform", "mlm_norm", "nsp_logits"]
    assert (run / "vocab.txt").read_bytes() == (bert_run / "vocab.txt").read_bytes()
    assert (run / "labels.txt").read_text() == "animal\nthing\n"
    config = RunDirectory(run).read_config()
    assert config.options == {  # the architecture of the bert run, the dropout of the family
        "num_layers": 1, "d_model": 16, "num_heads": 2, "ff_dim": 32, "dropout": 0.1,
    }  # fmt: skip
    assert metrics["steps"] == 1 and 0 <= metrics["dev_accuracy"] <= 1
    # One Adam step from the pre-trained weights: no loaded weight moved further than the rate.
    pretrained, tuned = RunDirectory(bert_run).load_model(), RunDirectory(run).load_model()
    for name in BACKBONE:
        for ours, theirs in zip(layer_weights(tuned, name), layer_weights(pretrained, name),
                                strict=True):  # fmt: skip
            assert np.abs(ours - theirs).max() <= LEARNING_RATE * (1 + 1e-4), name


def test_bert_classifier_batches_are_packed_as_in_pre_training(classifier_run):
    run = RunDirectory(classifier_run[0])
    config = run.read_config()
    family = get_family(config.model)
    task = get_task(family.task)
    data = task.load_data(config, family)
    plan = task.plan(run, config, family, data["train"])
    tokenizer = run.tokenizer()
    vocab = tokenizer.vocab
    labels = {text: ("animal", "thing").index(name) for text, name in labelled_sentences(240, 0)}
    features, batch_labels = plan.batch(0)
    assert (features["segment_ids"] == 0).all()
    for row, label in zip(features["token_ids"], batch_labels, strict=True):
        row = row[row != 0]
        assert row[0] == vocab.index("[CLS]") and row[-1] == vocab.index("[SEP]")
        text = tokenizer.detokenize(tf.constant([row[1:-1]])).numpy()[0].decode()
        assert labels[text] == label


def test_initialize_from_copies_the_pretrained_weights_by_layer_name(bert_run, classifier_run):
    run = RunDirectory(classifier_run[0])
    config = run.read_config()
    family = get_family(config.model)
    model = get_task(family.task).build_model(run, config, family)
    ids = np.array([[4, 9, 10, 5]], np.int32)
    model({"token_ids": ids, "segment_ids": np.zeros_like(ids)})
    pretrained = RunDirectory(bert_run).load_model()
    head = layer_weights(model, "classifier")
    assert not np.allclose(layer_weights(model, "embedding")[0], pretrained.get_weights()[0])
    lines = []
    report = initialize_from(model, RunDirectory(bert_run), lines.append)
    assert (report["loaded"], report["new"]) == (BACKBONE, ["classifier"])
    assert "loaded 5 layers" in lines[0]
    for name in BACKBONE:
        for ours, theirs in zip(layer_weights(model, name), layer_weights(pretrained, name),
                                strict=True):  # fmt: skip
            np.testing.assert_array_equal(ours, theirs, err_msg=name)
    for before, after in zip(head, layer_weights(model, "classifier"), strict=True):
        np.testing.assert_array_equal(before, after)  # the new head keeps its initial weights


def test_vocab_from_copies_the_vocabulary_and_no_weights(bert_run, corpora, tmp_path):
    run = tmp_path / "baseline"
    options = dict(model="bert-classifier", corpus=corpora["labelled"], steps=1, **TINY)
    train(run, TrainConfig(**options, vocab_from=str(bert_run)), progress=False, log=quiet)
    assert (run / "vocab.txt").read_bytes() == (bert_run / "vocab.txt").read_bytes()
    assert not (run / "init_from.json").exists()
    pretrained, trained = RunDirectory(bert_run).load_model(), RunDirectory(run).load_model()
    # Loaded weights would be within one step (the learning rate) of the pre-trained ones.
    distance = np.abs(
        layer_weights(trained, "embedding")[0] - layer_weights(pretrained, "embedding")[0]
    )
    assert distance.max() > 2 * LEARNING_RATE


def test_init_from_must_name_a_finished_run(bert_run, corpora, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    for name in ("config.json", "vocab.txt"):
        shutil.copy(bert_run / name, unfinished / name)
    for origin, words in ((empty, "no config.json"), (unfinished, "has no model.keras")):
        config = fine_tuning(
            model="bert-classifier", corpus=corpora["labelled"], init_from=str(origin)
        )
        with pytest.raises(PathNotFoundError, match=words) as caught:
            train(tmp_path / "out", config, progress=False, log=quiet)
        assert "init_from" in caught.value.fields and str(origin) in str(caught.value)
        assert not (tmp_path / "out").exists()


def test_init_from_refuses_a_different_architecture_or_vocab_from_too(bert_run, corpora, tmp_path):
    out = tmp_path / "out"
    wider = fine_tuning(
        model="bert-classifier",
        corpus=corpora["labelled"],
        init_from=str(bert_run),
        options={"d_model": 64},
    )
    with pytest.raises(ConfigError, match="d_model=64 here, d_model=16 there") as caught:
        train(out, wider, progress=False, log=quiet)
    assert f"this run ({out}, model='bert-classifier')" in str(caught.value)
    assert f"init_from {bert_run} (a bert run)" in str(caught.value)
    assert set(caught.value.fields) == {"d_model", "init_from", "model"}
    assert not out.exists()
    both = dataclasses.replace(wider, options=None, vocab_from=str(bert_run))
    with pytest.raises(ConfigError, match="drop vocab_from") as caught:
        train(out, both, progress=False, log=quiet)
    assert set(caught.value.fields) == {"init_from", "vocab_from"}
    assert not out.exists()


def test_a_model_of_another_kind_is_refused_before_anything_is_written(bert_run, corpora, tmp_path):
    out = tmp_path / "out"
    config = fine_tuning(
        model="gpt-classifier", corpus=corpora["labelled"], init_from=str(bert_run)
    )
    with pytest.raises(ConfigError, match="gpt-classifier starts from runs of gpt, ") as caught:
        train(out, config, progress=False, log=quiet)
    assert set(caught.value.fields) == {"init_from", "model"}
    assert f"({out}, model='gpt-classifier')" in str(caught.value)
    assert not out.exists()


# --------------------------------------------------------------------------------------------
# bertsum: a pre-trained encoder with its own optimizer (Liu & Lapata, 2019).


def cosine(peak: float, warmup: int, total: int, step: int, alpha: float = 0.05) -> float:
    """Linear warm-up to `peak`, then cosine decay to `alpha · peak` at `total`."""
    if step < warmup:
        return peak * step / warmup
    progress = (step - warmup) / (total - warmup)
    return peak * (alpha + (1 - alpha) * 0.5 * (1 + math.cos(math.pi * progress)))


def bertsum_config(bert_run, corpora, **options) -> TrainConfig:
    return TrainConfig(**{**TINY, "model": "bertsum", "corpus": corpora["pairs"], **options,
                          "init_from": str(bert_run)})  # fmt: skip


def built_bertsum(config: TrainConfig):
    from keras_attn.models.families import bertsum_model

    model = bertsum_model(60, 50, 1, 16, 2, 32)
    model({"source_ids": np.array([[4, 7, 5]]), "target_ids": np.array([[2, 8]])})
    return model, _optimizer_groups(config, get_family("bertsum"), "float32", model)


def test_the_encoder_optimizer_trains_exactly_the_encoder_layers_on_its_own_schedule(
    bert_run, corpora
):
    options = dict(steps=100, warmup_steps=10, learning_rate=1e-3)
    config = bertsum_config(bert_run, corpora, **options, encoder_learning_rate=2e-5,
                            encoder_warmup_steps=30)  # fmt: skip
    model, groups = built_bertsum(config)
    assert len(groups) == 2
    (decoder_optimizer, rest), (encoder_optimizer, encoder) = groups
    expected = {
        v.path for name in BERTSUM_ENCODER_LAYERS for v in model.get_layer(name).trainable_variables
    }
    assert {v.path for v in encoder} == expected and len(encoder) == len(expected)
    assert {v.path for v in rest} == {v.path for v in model.trainable_variables} - expected
    assert any(v.path.startswith("decoder") for v in rest)
    for step in (0, 5, 10, 20, 30, 60, 100):
        for optimizer, peak, warmup in (
            (decoder_optimizer, 1e-3, 10),
            (encoder_optimizer, 2e-5, 30),
        ):
            optimizer.iterations.assign(step)
            expected_rate = cosine(peak, warmup, 100, step)
            assert float(optimizer.learning_rate) == pytest.approx(
                expected_rate, rel=1e-5, abs=1e-12
            )
    # Without encoder_learning_rate: one optimizer for every variable.
    one = bertsum_config(bert_run, corpora, **options)
    model, groups = built_bertsum(one)
    assert len(groups) == 1 and len(groups[0][1]) == len(model.trainable_variables)
    assert float(groups[0][0].learning_rate) == 0.0  # step 0 of the warm-up


def test_bertsum_with_a_tiny_encoder_rate_keeps_the_pretrained_encoder(bert_run, corpora, tmp_path):
    run = tmp_path / "bertsum"
    config = bertsum_config(
        bert_run, corpora, steps=3, encoder_learning_rate=1e-7, eval_sentences=0
    )  # no BLEU: decoding is not what this test is about
    config = dataclasses.replace(config, options=None)  # the init_from run's architecture
    train(run, config, progress=False, log=quiet)
    report = json.loads((run / "init_from.json").read_text())
    assert report["loaded"] == ["embedding", "segment_embedding", "embedding_norm", "encoder"]
    assert set(report["new"]) == {"decoder_embedding", "decoder"}
    reader = tf.train.load_checkpoint(str(run / "checkpoints"))
    names = reader.get_variable_to_shape_map()
    iterations = [n for n in names if n.endswith("_iterations/.ATTRIBUTES/VARIABLE_VALUE")]
    assert sorted(n.split("/")[0] for n in iterations) == ["encoder_optimizer", "optimizer"]
    assert all(reader.get_tensor(n) == 3 for n in iterations)
    pretrained, trained = RunDirectory(bert_run).load_model(), RunDirectory(run).load_model()
    for name in BERTSUM_ENCODER_LAYERS:  # three Adam steps of at most about 1e-7 each
        for ours, theirs in zip(layer_weights(trained, name), layer_weights(pretrained, name),
                                strict=True):  # fmt: skip
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5, err_msg=name)
    # The decoder, at the full rate, moved: compare with its initial weights (the trainer seeds
    # the model's initialisers with config.seed before building it).
    saved = RunDirectory(run).read_config()
    keras.utils.set_random_seed(saved.seed)
    initial = get_task("translation").build_model(RunDirectory(run), saved, get_family("bertsum"))
    moved = [
        np.abs(ours - theirs).max()
        for ours, theirs in zip(
            layer_weights(trained, "decoder"), layer_weights(initial, "decoder"), strict=True
        )
    ]
    # Each of 3 Adam steps moves a weight by at most about the rate (<= 0.01): the initial
    # weights were rebuilt right, and the decoder trained.
    assert 1e-3 < max(moved) <= 3.3 * LEARNING_RATE


def test_encoder_learning_rate_needs_a_model_with_an_encoder():
    for model in ("transformer", "bert-classifier", "gpt"):
        with pytest.raises(ConfigError, match="encoder_learning_rate needs") as caught:
            TrainConfig(model=model, encoder_learning_rate=1e-4).validate()
        assert set(caught.value.fields) == {"encoder_learning_rate", "model"}
    with pytest.raises(ConfigError) as caught:
        TrainConfig(model="bertsum", encoder_warmup_steps=5).validate()
    assert "encoder_learning_rate" in caught.value.fields
