import dataclasses
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from keras_attn.cli import main as cli
from keras_attn.export.prefix_steps import PrefixSteps
from keras_attn.export.translator import Translator
from keras_attn.formats import LABELS, VOCAB
from keras_attn.models.bart.model import bart
from keras_attn.models.families import (
    bert_classifier_model,
    bert_pretraining_model,
    get_family,
)
from keras_attn.text.masked_lm import BERT_RESERVED_TOKENS
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import save_vocab
from keras_attn.training.trainer import (
    CONFIG_FILE,
    MODEL_FILE,
    SOURCE_VOCAB,
    TARGET_VOCAB,
    RunDirectory,
    TrainConfig,
)

SENTENCES = ["el gato negro", "la casa", ""]


@pytest.fixture(scope="module")
def untrained_run(tmp_path_factory, vocabularies):
    """An untrained run directory laid out as `keras-attn train` writes it, built once."""
    run = RunDirectory(tmp_path_factory.mktemp("cli") / "run")
    run.path.mkdir()
    config = TrainConfig(options={"units": 16, "embedding_dim": 8, "dropout": 0.0}, max_length=20)
    run.write_json(CONFIG_FILE, dataclasses.asdict(config))
    for name, vocab in zip((SOURCE_VOCAB, TARGET_VOCAB), vocabularies, strict=True):
        save_vocab(run.file(name), vocab)
    model = get_family(config.model).build(
        len(vocabularies[0]), len(vocabularies[1]), **config.model_hyperparameters()
    )
    model.save(run.file(MODEL_FILE))
    return run.path


@pytest.fixture
def run_dir(untrained_run, tmp_path):
    """A fresh copy of `untrained_run` (a test may rewrite its model)."""
    return shutil.copytree(untrained_run, tmp_path / "run")


def graph_ops(path):
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((path / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    return {node.op for node in graph.node} | {
        node.op for function in graph.library.function for node in function.node_def
    }


def in_process_translator(run_dir, **kwargs):
    run = RunDirectory(run_dir)
    model = run.load_model()
    source, target = run.tokenizers()
    steps = get_family(run.read_config().model).decoding_steps(model, kwargs["max_output_length"])
    return Translator(model, steps, source, target, max_source_length=20, **kwargs)


def test_export_with_the_beam_decoder(run_dir, tmp_path):
    base = tmp_path / "models"
    flags = ["--decoder", "beam", "--beam-size", "3", "--length-penalty", "0.8"]
    command = ["export", str(run_dir), "--model_base_path", str(base), "--max-output-length", "9"]
    assert cli([*command, *flags]) == 0  # includes the contract check
    # The beam's top-k over beam * V candidates is in the graph (a greedy export has no TopKV2).
    assert "TopKV2" in graph_ops(base / "1")

    loaded = tf.saved_model.load(str(base / "1"))
    translator = in_process_translator(
        run_dir, max_output_length=9, decoder="beam", beam_size=3, length_penalty=0.8
    )
    for signature in ("serving_default", "translate", "translate_with_alignment"):
        got = loaded.signatures[signature](text=tf.constant(SENTENCES))
        method = "translate" if signature != "translate_with_alignment" else signature
        want = getattr(translator, method)(tf.constant(SENTENCES))
        assert set(got) == set(want)
        for name, value in want.items():
            if value.dtype == tf.float32:
                np.testing.assert_allclose(got[name].numpy(), value.numpy(), rtol=1e-5, atol=1e-6)
            else:
                np.testing.assert_array_equal(got[name].numpy(), value.numpy())


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--beam-size", "3"], "--beam-size only apply to --decoder beam"),
        (["--length-penalty", "1"], "--length-penalty only apply to --decoder beam"),
        (["--decoder", "beam", "--beam-size", "0"], "Received: --beam-size 0"),
    ],
)
def test_decoder_flag_mistakes_are_one_line_errors(run_dir, tmp_path, capsys, flags, message):
    command = ["export", str(run_dir), "--model_base_path", str(tmp_path / "m"), *flags]
    assert cli(command) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error
    assert not (tmp_path / "m").exists() or not any((tmp_path / "m").iterdir())


def test_a_model_with_non_finite_weights_is_not_exported(run_dir, tmp_path, capsys):
    run = RunDirectory(run_dir)
    model = run.load_model()
    weights = model.get_weights()
    weights[-1][0] = np.nan
    model.set_weights(weights)
    model.save(run.file(MODEL_FILE))
    base = tmp_path / "models"
    assert cli(["export", str(run_dir), "--model_base_path", str(base)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"keras-attn export: error: {run.file(MODEL_FILE)} has non-finite ")
    assert "the run diverged" in error and len(error.splitlines()) == 1
    assert not base.exists() or not any(base.iterdir())


NOT_EXPORTED = {
    "bert": lambda vocabulary: bert_pretraining_model(vocabulary, 1, 8, 2, 16),
    "bart": lambda vocabulary: bart(vocabulary, 1, 8, 2, 16),
}


def fake_run(path, model_name, vocabulary, build) -> RunDirectory:
    """A run directory of `model_name` with an untrained model, laid out as `train` writes it."""
    run = RunDirectory(path)
    run.path.mkdir()
    config = TrainConfig(
        model=model_name,
        options={"num_layers": 1, "d_model": 8, "num_heads": 2, "ff_dim": 16},
        max_length=20,
    )
    run.write_json(CONFIG_FILE, dataclasses.asdict(config))
    save_vocab(run.file(VOCAB), vocabulary)
    run.file(LABELS).write_text("neg\nneu\npos\n", encoding="utf-8")
    build(len(vocabulary)).save(run.file(MODEL_FILE))
    return run


@pytest.mark.parametrize("model_name", sorted(NOT_EXPORTED))
def test_pretraining_runs_are_refused_in_one_line(tmp_path, vocabularies, capsys, model_name):
    run = fake_run(tmp_path / "run", model_name, vocabularies[0], NOT_EXPORTED[model_name])
    base = tmp_path / "models"
    assert cli(["export", str(run.path), "--model_base_path", str(base)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"keras-attn export: error: a {model_name} run is not exported: ")
    assert "--init-from" in error and len(error.splitlines()) == 1
    assert not base.exists()


def test_a_classifier_run_exports_with_classify_and_refuses_decoding_flags(
    tmp_path, vocabularies, capsys
):
    """The CLI dispatch (exported graphs against training's formats: test_classifier.py)."""
    vocabulary = [*vocabularies[0], *(t for t in BERT_RESERVED_TOKENS if t not in vocabularies[0])]
    build = lambda size: bert_classifier_model(size, 3, 1, 8, 2, 16)  # noqa: E731
    run = fake_run(tmp_path / "run", "bert-classifier", vocabulary, build)
    base = tmp_path / "models"
    command = ["export", str(run.path), "--model_base_path", str(base)]
    assert cli([*command, "--decoder", "beam", "--beam-size", "3"]) == 2
    error = capsys.readouterr().err
    assert error == (
        "keras-attn export: error: --decoder, --beam-size: a classifier or tagger run is not "
        "decoded; its export has no decoding options\n"
    )
    assert not base.exists()
    assert cli(command) == 0
    loaded = tf.saved_model.load(str(base / "1"))
    assert {"serving_default", "predict", "classify"} <= set(loaded.signatures)
    out = loaded.signatures["predict"](text=tf.constant(SENTENCES))
    scores = out["scores"].numpy()
    assert scores.shape == (len(SENTENCES), 3)
    np.testing.assert_allclose(scores.sum(axis=-1), 1.0, rtol=1e-5)
    assert [row.tolist() for row in out["classes"].numpy()] == [[b"neg", b"neu", b"pos"]] * 3


# --keras-model: any Keras translator, without a run directory.

KERAS_WORDS = "el la gato casa negro blanca perro sol luna grande".split()
KERAS_VOCAB = ["[PAD]", "[UNK]", "[START]", "[END]", *KERAS_WORDS]


@keras.saving.register_keras_serializable(package="user_layers")
class Doubled(keras.layers.Layer):
    """A user's own layer, registered under its own package."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, x):
        return 2.0 * x


def keras_translator(middle=None):
    """A tiny functional translator (LSTM encoder, LSTM decoder seeded with its state); `middle`
    maps the decoder's outputs before the output projection."""
    keras.utils.set_random_seed(3)
    source = keras.Input((None,), dtype="int64", name="src")
    target = keras.Input((None,), dtype="int64", name="tgt")
    _, h, c = keras.layers.LSTM(8, return_state=True)(
        keras.layers.Embedding(len(KERAS_VOCAB), 8, mask_zero=True)(source)
    )
    decoded = keras.layers.LSTM(8, return_sequences=True)(
        keras.layers.Embedding(len(KERAS_VOCAB), 8, mask_zero=True)(target), initial_state=[h, c]
    )
    decoded = decoded if middle is None else middle(decoded)
    return keras.Model([source, target], keras.layers.Dense(len(KERAS_VOCAB))(decoded))


@pytest.fixture(scope="module")
def keras_files(tmp_path_factory):
    """`model.keras` (inputs named src and tgt), `causal_not.keras` (a bidirectional decoder)
    and the vocabulary file both sides use."""
    root = tmp_path_factory.mktemp("keras-model")
    model = keras_translator()
    model.save(root / "model.keras")
    source = keras.Input((None,), dtype="int32", name="source_ids")
    target = keras.Input((None,), dtype="int32", name="target_ids")
    embedded = keras.layers.Embedding(len(KERAS_VOCAB), 8)(target)
    both_ways = keras.layers.Bidirectional(keras.layers.LSTM(8, return_sequences=True))(embedded)
    keras.Model([source, target], keras.layers.Dense(len(KERAS_VOCAB))(both_ways)).save(
        root / "causal_not.keras"
    )
    save_vocab(root / "vocab.txt", KERAS_VOCAB)
    return {"root": root, "model": model}


def keras_model_command(files, base, *flags, model="model.keras"):
    vocab = str(files["root"] / "vocab.txt")
    return [
        "export", "--keras-model", str(files["root"] / model), "--source-vocab", vocab,
        "--target-vocab", vocab, "--model_base_path", str(base), *flags,
    ]  # fmt: skip


def test_export_a_keras_model_with_the_beam_decoder(keras_files, tmp_path, capsys):
    base = tmp_path / "models"
    flags = ["--decoder", "beam", "--beam-size", "3", "--length-penalty", "0.8"]
    flags += ["--max-output-length", "6", "--max-source-length", "10", "--version", "4"]
    flags += ["--source-input", "src", "--target-input", "1"]
    assert cli(keras_model_command(keras_files, base, *flags)) == 0  # with the contract check
    assert capsys.readouterr().out == f"exported {base / '4'}\n"
    loaded = tf.saved_model.load(str(base / "4"))
    assert set(loaded.signatures) == {"serving_default", "translate"}
    model, tokenizer = keras_files["model"], WordPieceTokenizer(KERAS_VOCAB)
    translator = Translator(
        model,
        PrefixSteps(model, 6),
        tokenizer,
        tokenizer,
        max_source_length=10,
        max_output_length=6,
        decoder="beam",
        beam_size=3,
        length_penalty=0.8,
    )
    texts = tf.constant(["el gato negro", "la casa blanca grande", ""])
    want = translator.translate(texts)
    for signature in ("serving_default", "translate"):
        got = loaded.signatures[signature](text=texts)
        np.testing.assert_array_equal(got["tokens"].numpy(), want["tokens"].numpy())
        np.testing.assert_array_equal(got["translation"].numpy(), want["translation"].numpy())
        np.testing.assert_allclose(got["scores"].numpy(), want["scores"].numpy(), atol=1e-5)


def test_import_registers_the_users_layers_before_loading(tmp_path, monkeypatch, capsys):
    model = keras_translator(middle=Doubled())
    model.save(tmp_path / "user.keras")
    save_vocab(tmp_path / "vocab.txt", KERAS_VOCAB)
    files = {"root": tmp_path}
    # As in a fresh process, which knows the layer only once the user's module is imported.
    monkeypatch.delitem(keras.saving.get_custom_objects(), "user_layers>Doubled")
    base = tmp_path / "models"
    command = keras_model_command(files, base, "--skip-check", model="user.keras")
    assert cli(command) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"keras-attn export: error: --keras-model {tmp_path}/user.keras ")
    assert "does not load: Could not locate class 'Doubled' (a model with its own " in error
    assert "--import" in error and len(error.splitlines()) == 1
    assert cli([*command, "--import", "no_such_module_here"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("keras-attn export: error: --import no_such_module_here does not ")

    (tmp_path / "my_layers_for_export.py").write_text(
        "import keras\n\n\n"
        '@keras.saving.register_keras_serializable(package="user_layers")\n'
        "class Doubled(keras.layers.Layer):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.supports_masking = True\n\n"
        "    def call(self, x):\n"
        "        return 2.0 * x\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "my_layers_for_export", raising=False)
    assert cli([*command, "--import", "my_layers_for_export", "--max-output-length", "5"]) == 0
    loaded = tf.saved_model.load(str(base / "1"))
    tokenizer = WordPieceTokenizer(KERAS_VOCAB)
    texts = tf.constant(["el perro", "sol"])
    want = Translator(model, PrefixSteps(model, 5), tokenizer, tokenizer, max_output_length=5)
    got = loaded.signatures["translate"](text=texts)
    np.testing.assert_array_equal(got["tokens"].numpy(), want.translate(texts)["tokens"].numpy())


def test_a_keras_model_reading_later_target_tokens_is_refused_in_one_line(
    keras_files, tmp_path, capsys
):
    base = tmp_path / "models"
    assert cli(keras_model_command(keras_files, base, model="causal_not.keras")) == 2
    error = capsys.readouterr().err
    assert error.startswith("keras-attn export: error: the model reads later target tokens: ")
    assert "position 0" in error and len(error.splitlines()) == 1
    assert not base.exists()


KERAS_MODEL_MISTAKES = {
    "both": (
        ["{run}", "--keras-model", "{root}/model.keras"],
        "argument --keras-model: not allowed with argument RUN",
    ),
    "neither": ([], "one of the arguments RUN --keras-model is required"),
    "no vocabularies": (
        ["--keras-model", "{root}/model.keras"],
        "--keras-model needs --source-vocab and --target-vocab",
    ),
    "missing model file": (
        [
            "--keras-model",
            "{root}/none.keras",
            "--source-vocab",
            "{root}/vocab.txt",
            "--target-vocab",
            "{root}/vocab.txt",
        ],
        "--keras-model {root}/none.keras is not a file",
    ),  # fmt: skip
    "missing vocabulary": (
        [
            "--keras-model",
            "{root}/model.keras",
            "--source-vocab",
            "{root}/vocab.txt",
            "--target-vocab",
            "{root}/none.txt",
        ],
        "--target-vocab {root}/none.txt is not a file",
    ),  # fmt: skip
    "greedy with a beam size": (
        [
            "--keras-model",
            "{root}/model.keras",
            "--source-vocab",
            "{root}/vocab.txt",
            "--target-vocab",
            "{root}/vocab.txt",
            "--beam-size",
            "3",
        ],
        "--beam-size only apply to --decoder beam",
    ),  # fmt: skip
    "a --keras-model option with RUN": (
        ["{run}", "--source-vocab", "{root}/vocab.txt", "--outputs", "logits"],
        "--source-vocab, --outputs only apply to --keras-model, not to RUN",
    ),
}


@pytest.mark.parametrize("args, message", KERAS_MODEL_MISTAKES.values(), ids=KERAS_MODEL_MISTAKES)
def test_keras_model_mistakes_are_one_line_before_tensorflow(tmp_path, args, message):
    """In a child process whose `tensorflow` fails to import: found before TensorFlow loads."""
    poisoned = tmp_path / "poisoned" / "tensorflow"
    poisoned.mkdir(parents=True)
    (poisoned / "__init__.py").write_text('raise ImportError("tensorflow was imported")\n')
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")
    (tmp_path / "run" / "model.keras").write_text("")
    (tmp_path / "model.keras").write_text("")
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    names = {"run": tmp_path / "run", "root": tmp_path}
    argv = ["export", *(arg.format(**names) for arg in args)]
    argv += ["--model_base_path", str(tmp_path / "models")]
    pythonpath = os.pathsep.join([str(poisoned.parent), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=pythonpath)
    result = subprocess.run(
        [sys.executable, "-m", "keras_attn.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.stderr == f"keras-attn export: error: {message.format(**names)}\n"
    assert (result.returncode, result.stdout) == (2, "")
