"""`--init-from` and `--vocab-from` across the model families.

Every pair of families is tried. A run that cannot start from another is refused with one
`ConfigError` (one line and exit status 2 from `keras-attn train`) that names both runs and what
does not match — the family kind, a vocabulary, the reserved tokens, a shape — before anything
is written. The pairs that can start from each other pass the same checks, and a few of them
train.

The origin runs of the refusals are run directories as `train` starts them (`config.json` and
the vocabularies the family's task writes) with an empty `model.keras`: a refusal reads no
weights, so none are trained for it. The runs that initialise real fine-tuning are trained.
"""

import dataclasses
import json

import numpy as np
import pytest

from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.formats import CONFIG_FILE, MODEL_FILE
from keras_attn.models.families import MODEL_FAMILIES, get_family
from keras_attn.training.initialization import check_origin_run, resolve_init_config
from keras_attn.training.tasks import get_task
from keras_attn.training.trainer import RunDirectory, TrainConfig, train

FAMILIES = [
    name
    for name, f in MODEL_FAMILIES.items()
    if getattr(f.build, "func", f.build).__module__.startswith("keras_attn")
]
# The families whose runs start from each other's weights: one pre-trained model each.
GROUPS = (
    {"bert", "bert-classifier", "bert-tagger", "bertsum"},
    {"bart", "bart-translator", "bart-classifier", "bart-tagger"},
    {"gpt", "gpt-classifier"},
)
# Families of a group whose runs keep their vocabulary as source and target files, and the
# families of the group that read one vocab.txt (which those runs do not have).
TWO_VOCABULARIES = {"bertsum", "bart-translator"}
ONE_VOCABULARY = {
    "bert", "bert-classifier", "bert-tagger", "bart", "bart-classifier", "bart-tagger",
}  # fmt: skip
TRANSFORMER = dict(num_layers=1, d_model=16, num_heads=2, ff_dim=32)
# The options of a tiny model, each given to the families that take it.
TINY_OPTIONS = dict(units=8, embedding_dim=8, **TRANSFORMER)
TINY = dict(
    steps=1, batch_size=8, vocab_size=120, max_length=16,
    eval_sentences=0, mixed_precision="float32", warmup_steps=0,
    schedule="cosine", checkpoint_every=100,
)  # fmt: skip
WORDS = "cat dog bird fish table chair book lamp the a big small red green sees has".split()


def quiet(line: str) -> None:
    pass


def same_group(a: str, b: str) -> bool:
    return a == b or any(a in group and b in group for group in GROUPS)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, str]:
    """Five-word sentences as pairs, as labelled sentences and as tagged sentences."""
    folder = tmp_path_factory.mktemp("corpora")
    rng = np.random.default_rng(0)
    sentences = sorted({" ".join(rng.choice(WORDS, size=5)) for _ in range(200)})
    files = {
        "pairs": "".join(f"{s}\t{s}\n" for s in sentences),
        "labelled": "".join(f"{s}\t{'animal' if 'cat' in s else 'thing'}\n" for s in sentences),
        "tagged": "".join(
            f"{s}\t{' '.join('ANIMAL' if w == 'cat' else 'O' for w in s.split())}\n"
            for s in sentences
        ),
    }
    for name, text in files.items():
        (folder / f"{name}.tsv").write_text(text)
    return {name: str(folder / f"{name}.tsv") for name in files}


def config_for(name: str, corpora: dict, **fields) -> TrainConfig:
    """A tiny config of family `name`, on the corpus its task reads; `fields` may name the
    family's options too."""
    family = get_family(name)
    corpus = {"classification": corpora["labelled"], "tagging": corpora["tagged"]}.get(
        family.task,
        "scenes-32" if family.task in ("captioning", "question_answering") else corpora["pairs"],
    )
    options = {k: v for k, v in {**TINY_OPTIONS, **fields}.items() if k in family.option_names}
    fields = {k: v for k, v in fields.items() if k not in family.option_names}
    if family.task == "captioning":
        fields["train_examples"] = 16
    return TrainConfig(model=name, corpus=corpus, options=options, **{**TINY, **fields})


def fine_tuning(name: str, corpora: dict, **fields) -> TrainConfig:
    """`config_for(name)` that leaves the options it is not given to the run it starts from."""
    config = config_for(name, corpora, **fields)
    return dataclasses.replace(
        config, options={k: v for k, v in config.options.items() if k in fields}
    )


@pytest.fixture(scope="module")
def origins(tmp_path_factory, corpora) -> dict[str, str]:
    """Per family, a run directory as `train` starts it, marked finished by an empty model."""
    root = tmp_path_factory.mktemp("origins")
    runs = {}
    for name in FAMILIES:
        config, family = config_for(name, corpora), get_family(name)
        task = get_task(family.task)
        run = RunDirectory(root / name)
        run.path.mkdir()
        run.write_json(CONFIG_FILE, dataclasses.asdict(config))
        task.prepare_run(run, config, family, task.load_data(config, family), quiet)
        run.file(MODEL_FILE).touch()
        runs[name] = str(run.path)
    return runs


def refusal(out, config: TrainConfig) -> str:
    """The message of the `ConfigError` that `train` refuses `config` with; nothing written."""
    with pytest.raises(ConfigError) as caught:
        train(out, config, progress=False, log=quiet)
    assert not out.exists()
    return str(caught.value)


def test_a_family_refuses_the_runs_of_other_kinds_naming_both_runs(origins, corpora, tmp_path):
    refused = 0
    for target in FAMILIES:
        for source in FAMILIES:
            if same_group(source, target):
                continue
            out = tmp_path / f"{source}-into-{target}"
            message = refusal(out, fine_tuning(target, corpora, init_from=origins[source]))
            assert message.startswith(
                f"this run ({out}, model='{target}') cannot start from init_from "
                f"{origins[source]} (a {source} run): {target} starts from runs of "
            ), message
            named = message.split(" starts from runs of ")[1].split(", ")
            assert set(named) == {name for name in FAMILIES if same_group(name, target)}
            refused += 1
    assert (
        refused
        == len(FAMILIES) ** 2
        - sum(len([s for s in FAMILIES if same_group(s, t)]) for t in FAMILIES)
        and refused > 150
    )


def test_a_run_of_the_same_kind_without_the_vocabulary_is_refused(origins, corpora, tmp_path):
    for target in sorted(ONE_VOCABULARY):
        for source in sorted(TWO_VOCABULARIES):
            if not same_group(source, target):
                continue
            out = tmp_path / f"{source}-into-{target}"
            message = refusal(out, fine_tuning(target, corpora, init_from=origins[source]))
            assert message == (
                f"this run ({out}, model='{target}') cannot start from init_from "
                f"{origins[source]} (a {source} run): it has no vocab.txt, the vocabulary this "
                "run's vocab.txt is copied from"
            )


def test_the_runs_of_the_same_kind_pass_the_checks(origins, corpora, tmp_path):
    passed = []
    for target in FAMILIES:
        for source in FAMILIES:
            if not same_group(source, target) or (
                source in TWO_VOCABULARIES and target in ONE_VOCABULARY
            ):
                continue
            config = fine_tuning(target, corpora, init_from=origins[source])
            out = tmp_path / "out"
            config = resolve_init_config(config, RunDirectory(origins[source]), quiet, out)
            check_origin_run(config, get_family(target), out, "init_from")
            passed.append((source, target))
    # Every family from itself, and the pre-trained families' fine-tuning pairs.
    assert {(name, name) for name in FAMILIES} <= set(passed)
    assert {("bert", "bert-classifier"), ("bart", "bart-translator"), ("gpt", "gpt-classifier"),
            ("bert", "bertsum"), ("bert-classifier", "bert-tagger")} <= set(passed)  # fmt: skip


def test_a_different_shape_option_is_refused_naming_both_values(origins, corpora, tmp_path):
    out = tmp_path / "out"
    wider = fine_tuning("rnn-attention", corpora, init_from=origins["rnn-attention"], units=16)
    assert refusal(out, wider) == (
        f"this run ({out}, model='rnn-attention') cannot start from init_from "
        f"{origins['rnn-attention']} (a rnn-attention run): units=16 here, units=8 there (its "
        "weights have that shape; leave units unset to take it)"
    )
    deeper = fine_tuning("transformer", corpora, init_from=origins["transformer"], num_layers=2)
    assert "num_layers=2 here, num_layers=1 there" in refusal(out, deeper)


def test_vocab_from_refuses_missing_vocabularies_and_reserved_tokens(origins, corpora, tmp_path):
    out = tmp_path / "out"
    captions = origins["show-attend-tell"]
    message = refusal(out, config_for("bert-classifier", corpora, vocab_from=captions))
    assert message == (
        f"this run ({out}, model='bert-classifier') cannot take the vocabularies of vocab_from "
        f"{captions} (a show-attend-tell run): its vocab.txt lacks the reserved tokens [CLS] "
        "[SEP] [MASK] that this run's vocab.txt needs"
    )
    message = refusal(out, config_for("rnn-attention", corpora, vocab_from=origins["gpt"]))
    assert message.endswith(
        "it has no source_vocab.txt, the vocabulary this run's source_vocab.txt is copied from"
    )
    # A vocabulary only: the family kind does not matter.
    config = config_for("text-cnn", corpora, vocab_from=origins["gpt"])
    check_origin_run(config, get_family("text-cnn"), out, "vocab_from")


@pytest.mark.parametrize(
    "source,target,flags",
    [
        ("show-attend-tell", "bert-classifier", ["--init-from"]),
        ("gpt", "bert-classifier", ["--vocab-from"]),
        ("bertsum", "bert-classifier", ["--init-from"]),
    ],
)
def test_the_command_line_reports_a_refusal_in_one_line(
    origins, corpora, tmp_path, capsys, source, target, flags
):
    out = tmp_path / "out"
    argv = ["train", "--model", target, "--corpus", corpora["labelled"], "--out", str(out)]
    assert cli([*argv, *flags, origins[source], "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("keras-attn train: error: this run (")
    assert (
        f"{out}, --model {target})" in err and f"{flags[0]} {origins[source]} (a {source} " in err
    )
    assert not out.exists()


# ------------------------------------------------------------------------------------------------
# Pairs that train: a translator fine-tuned from a BART and again from itself (a classifier from a
# BERT or a GPT: test_initialization.py, test_classification_tasks.py); and a shape the checks
# cannot see in the configs (a GPT's positions follow max_length).


@pytest.fixture(scope="module")
def trained(tmp_path_factory, corpora) -> dict[str, str]:
    root = tmp_path_factory.mktemp("trained")
    runs = {}
    for name, origin in (
        ("bart", None),
        ("bart-translator", "bart"),
        ("bart-translator-again", "bart-translator"),
        ("gpt", None),
    ):
        family = name.removesuffix("-again")
        if origin is None:
            config = config_for(family, corpora)
        else:
            config = fine_tuning(family, corpora, init_from=runs[origin])
        train(root / name, config, progress=False, log=quiet)
        runs[name] = str(root / name)
    return runs


def test_a_translator_trains_from_a_bart_run_and_then_from_its_own_run(trained):
    def report(name: str) -> dict:
        return json.loads((RunDirectory(trained[name]).file("init_from.json")).read_text())

    bart, again = report("bart-translator"), report("bart-translator-again")
    assert bart["init_from"] == trained["bart"] and bart["new"] == [] and len(bart["loaded"]) > 3
    # The same family: every layer, and its source and target vocabularies by name.
    assert again["init_from"] == trained["bart-translator"] and again["new"] == []
    assert set(again["loaded"]) == set(bart["loaded"])
    for name in ("source_vocab.txt", "target_vocab.txt"):
        ours = RunDirectory(trained["bart-translator-again"]).file(name).read_bytes()
        assert ours == RunDirectory(trained["bart-translator"]).file(name).read_bytes()


def test_a_layer_of_another_shape_is_refused_and_the_new_run_removed(trained, corpora, tmp_path):
    out = tmp_path / "out"
    longer = fine_tuning("gpt", corpora, init_from=trained["gpt"], max_length=20)
    with pytest.raises(ConfigError) as caught:
        train(out, longer, progress=False, log=quiet)
    assert str(caught.value).startswith(
        f"this run ({out}) cannot start from init_from {trained['gpt']} (a gpt run): its layer "
        "'embedding' has weights of shapes "
    )
    assert not out.exists()


def test_vocab_from_any_run_is_refused_in_terms_of_both_runs_or_gives_usable_vocabularies(
    origins, corpora, tmp_path
):
    accepted, planned = [], set()
    for target in FAMILIES:
        family = get_family(target)
        task = get_task(family.task)
        for source in FAMILIES:
            out = tmp_path / f"{source}-into-{target}"
            config = config_for(target, corpora, vocab_from=origins[source])
            try:
                check_origin_run(config, family, out, "vocab_from")
            except ConfigError as error:
                assert str(error).startswith(
                    f"this run ({out}, model='{target}') cannot take the vocabularies of "
                    f"vocab_from {origins[source]} (a {source} run): "
                )
                continue
            accepted.append((source, target))
            if source == target or target in planned:
                continue
            planned.add(target)
            # The first vocabularies of another family it takes serve its task: the batch plan
            # finds the reserved tokens it reads.
            run = RunDirectory(out)
            run.path.mkdir()
            splits = task.load_data(config, family)
            task.prepare_run(run, config, family, splits, quiet, RunDirectory(origins[source]))
            task.plan(run, config, family, splits["train"])
    assert {(name, name) for name in FAMILIES} <= set(accepted)
    assert ("bert", "bert-classifier") in accepted and ("gpt", "bert-classifier") not in accepted
