"""Pre-trained translators end to end: fine-tune with `--init-from`, export, serve.

An mBART run (the denoising family on both sides of `synthetic`, language tags; Liu et al.,
2020; written untrained, as `keras-attn train` writes it: its weights are what is carried over)
is fine-tuned into a `bart-translator`, exported (contract check included), served by the model
server `keras-attn serve` runs (in this process: the `serve` command line itself is tested in
tests/e2e) and queried with `keras-attn translate` over gRPC. The new-source-encoder variant (Lewis
et al., 2019, section 3.4) and the BertSum-style model (a pre-trained BERT encoder under a new
decoder with its own optimizer; Liu & Lapata, 2019) are exported and checked without a server.
Every SavedModel answers what the in-process `Translator` of its run answers, also when loaded in
a process that imports only tensorflow and tensorflow_text, and its scores are the teacher-forced
log-probabilities of the run's model.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import main as cli
from keras_attn.export.contract import check_translator_saved_model
from keras_attn.export.translator import Translator
from keras_attn.formats import INIT_REPORT, RunDirectory
from keras_attn.models.families import get_family
from keras_attn.serving.client import TranslatorClient
from keras_attn.serving.server import ModelServer
from keras_attn.text.corpora import load_corpus
from tests.export.served_scores import teacher_forced_log_probs

# Three fine-tunings, three exports and a server take minutes on a loaded 2-core machine:
# kept out of `make test-fast`.
pytestmark = pytest.mark.slow

SENTENCES = [source for source, _ in load_corpus("synthetic")["test"][:4]] + [""]
SIGNATURES = {  # exported signature -> the Translator method it wraps
    "serving_default": "translate",
    "translate": "translate",
    "translate_with_alignment": "translate_with_alignment",
}
METHODS = sorted(set(SIGNATURES.values()))
MAX_OUTPUT = 12


def train(out, *flags):
    """`keras-attn train` a few steps of a tiny model on `synthetic`; returns the run directory.

    No test here reads a run's dev metrics, so the dev scoring (a decoder trace per run) is
    skipped; the saved model is the same."""
    assert cli([
        "train", "--corpus", "synthetic", "--steps", "8", "--batch-size", "16",
        "--vocab-size", "400", "--eval-sentences", "0", "--checkpoint-every", "8",
        "--out", str(out), "--quiet", *flags,
    ]) == 0  # fmt: skip
    return out


@pytest.fixture(scope="module")
def mbart_run(tiny_run):
    """An untrained tiny mBART run: `bart` with the language tags of both sides of `synthetic`."""
    return tiny_run("bart", side="both", max_length=32).path


@pytest.fixture(scope="module")
def bert_run(tiny_run):
    return tiny_run("bert", side="both", max_length=32).path


def init_report(run):
    return json.loads((run / INIT_REPORT).read_text())


def export(run, base, *flags):
    """`keras-attn export` (it runs the contract check); returns the version directory."""
    command = ["export", str(run), "--model_base_path", str(base)]
    assert cli([*command, "--max-output-length", str(MAX_OUTPUT), *flags]) == 0
    return base / "1"


def in_process_translator(run, **decoder):
    run = RunDirectory(run)
    config = run.read_config_fields()
    model = run.load_model()
    steps = get_family(config["model"]).decoding_steps(model, MAX_OUTPUT)
    source, target = run.tokenizers()
    return Translator(
        model,
        steps,
        source,
        target,
        max_source_length=config["max_length"],
        max_output_length=MAX_OUTPUT,
        **decoder,
    )


def as_numpy(value):
    """A tensor or array as a NumPy array, its strings as `str` (the gRPC client decodes them)."""
    array = value.numpy() if isinstance(value, tf.Tensor) else np.asarray(value)
    if array.dtype == object:
        decode = np.vectorize(lambda v: v.decode() if isinstance(v, bytes) else v, otypes=[object])
        array = decode(array)
    return array


def assert_same(got, want):
    assert set(got) == set(want)
    for name in want:
        expected, actual = as_numpy(want[name]), as_numpy(got[name])
        assert actual.shape == expected.shape, name
        if expected.dtype == np.float32:
            np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=name)


def check_exported_translator(version, run, **decoder):
    """The export passes the contract check and answers what the run's in-process `Translator`
    answers, here and in a tensorflow + tensorflow_text only process; returns the SavedModel."""
    report = check_translator_saved_model(version, SENTENCES)
    assert report["leaked_modules"] == [] and report["unknown_ops"] == []
    assert not any(op.startswith(("Cudnn", "PyFunc", "EagerPyFunc")) for op in report["ops"])
    translator = in_process_translator(run, **decoder)
    loaded = tf.saved_model.load(str(version))
    wanted = {method: getattr(translator, method)(tf.constant(SENTENCES)) for method in METHODS}
    for signature, method in SIGNATURES.items():
        want = wanted[method]
        assert_same(loaded.signatures[signature](text=tf.constant(SENTENCES)), want)
        texts = [text.decode() for text in want["translation"].numpy()]
        assert report["outputs"][signature]["_text"] == texts
    # Scores are the teacher-forced log-probabilities the run's model gives the returned tokens.
    out = wanted["translate_with_alignment"]
    tokens, source_tokens = out["tokens"].numpy(), out["source_tokens"].numpy()
    assert tokens.shape[1] <= MAX_OUTPUT and (tokens != b"").any()
    limit = min(MAX_OUTPUT, 2 * source_tokens.shape[1] + 10)  # the export's length limit
    model, tokenizers = translator.model, (translator.source_tokenizer, translator.target_tokenizer)
    expected = teacher_forced_log_probs(model, tokenizers, source_tokens, tokens, limit)
    for row, (_, log_prob) in enumerate(expected):
        np.testing.assert_allclose(out["scores"].numpy()[row], log_prob, rtol=1e-4, atol=1e-4)
    return loaded


def test_mbart_fine_tuned_translator_is_served_and_answers_keras_attn_translate(
    mbart_run, tmp_path, capsys
):
    run = train(tmp_path / "run", "--model", "bart-translator", "--init-from", str(mbart_run))
    report = init_report(run)
    assert report["loaded"] == [
        "embedding",
        "encoder_embedding_norm",
        "decoder_embedding_norm",
        "encoder",
        "decoder",
    ]
    assert report["new"] == [] and report["unused"] == []
    base = tmp_path / "models" / "mbart"
    loaded = check_exported_translator(export(run, base), run)

    with ModelServer("mbart", str(base), port=0) as server:
        target = f"127.0.0.1:{server.port}"
        for signature in SIGNATURES:
            capsys.readouterr()
            command = ["translate", "--server", target, "--model_name", "mbart"]
            assert cli([*command, "--signature", signature, *SENTENCES]) == 0
            want = loaded.signatures[signature](text=tf.constant(SENTENCES))["translation"]
            assert capsys.readouterr().out.splitlines() == [t.decode() for t in want.numpy()]
        with TranslatorClient(target, "mbart", timeout=60) as client:
            served = client.translate_with_alignment(SENTENCES)
    want = loaded.signatures["translate_with_alignment"](text=tf.constant(SENTENCES))
    assert_same(served, want)


def test_new_source_encoder_translator_exports_with_beam_search(mbart_run, tmp_path):
    run = train(
        tmp_path / "run",
        "--model",
        "bart-translator",
        "--init-from",
        str(mbart_run),
        "--new-source-encoder-layers",
        "1",
    )
    report = init_report(run)
    assert {"embedding", "encoder", "decoder"} <= set(report["loaded"])
    assert report["new"] == ["source_embedding", "source_encoder"]
    version = export(run, tmp_path / "models", "--decoder", "beam", "--beam-size", "2")
    check_exported_translator(version, run, decoder="beam", beam_size=2, length_penalty=0.6)


def test_bertsum_translator_from_pretrained_bert_exports(bert_run, tmp_path):
    run = train(
        tmp_path / "run",
        "--model",
        "bertsum",
        "--init-from",
        str(bert_run),
        "--encoder-learning-rate",
        "1e-4",
        "--encoder-warmup-steps",
        "4",
    )
    report = init_report(run)
    assert {"embedding", "segment_embedding", "encoder"} <= set(report["loaded"])
    assert {"decoder_embedding", "decoder"} <= set(report["new"])
    assert {"mlm_transform", "nsp_logits"} <= set(report["unused"])
    check_exported_translator(export(run, tmp_path / "models"), run)
