"""`keras-attn export --jit-compile`: XLA-compiled decoding on shape buckets, same translations."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.export import buckets
from keras_attn.export.generator import Generator
from keras_attn.export.translator import Translator
from keras_attn.export.warmup import filler_word
from keras_attn.formats import warmup_path
from keras_attn.models import GPTSteps, gpt
from keras_attn.models.families import get_family
from keras_attn.serving.servable import load_servable
from keras_attn.serving.warmup import read_warmup_records, run_warmup
from keras_attn.serving.xla import xla_compilations
from keras_attn.text.corpora import load_corpus
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import build_wordpiece_vocab

MAX_LENGTH = 16  # the run's longest source: length buckets (8, 16)
BATCH_BUCKETS = (2, 4)
LENGTH_BUCKETS = (12, MAX_LENGTH)
TEST_SENTENCES = [source for source, _ in load_corpus("synthetic")["test"][:7]]


@pytest.fixture(scope="module")
def run(tiny_run):
    """An untrained tiny rnn-attention run of sources up to `MAX_LENGTH` tokens."""
    return tiny_run("rnn-attention", max_length=MAX_LENGTH)


@pytest.fixture(scope="module")
def model(run):
    """`run`'s model, loaded once for the file's tests (none of them changes it)."""
    return run.load_model()


def translators(run, model, **kwargs):
    """The plain and the compiled translator of `run`'s `model`, both with `kwargs`."""
    steps = get_family("rnn-attention").decoding_steps(model, 12)
    source, target = run.tokenizers()
    common = dict(max_source_length=MAX_LENGTH, max_output_length=12, **kwargs)
    return (
        Translator(model, steps, source, target, **common),
        Translator(
            model,
            steps,
            source,
            target,
            jit_compile=True,
            batch_buckets=BATCH_BUCKETS,
            length_buckets=LENGTH_BUCKETS,
            **common,
        ),
    )


@pytest.fixture(scope="module")
def plain(run, model):
    """`run`'s plain greedy translator (what the plain export serves: test_translator.py), its
    functions traced once for the file's tests."""
    return translators(run, model)[0]


def reference_padding(ids, batch_sizes, lengths, pad_id):
    """NumPy: cut to the last length bucket, pad rows (copies of row 0) and columns (pad_id)."""
    ids = ids[:, : lengths[-1]]
    batch, width = ids.shape
    rows = min(b for b in batch_sizes if b >= batch)
    columns = min(n for n in lengths if n >= width)
    out = np.full((rows, columns), pad_id, ids.dtype)
    out[:batch, :width] = ids
    out[batch:] = out[0] if batch else pad_id
    return out


@pytest.mark.parametrize(
    "shape", [(1, 1), (2, 8), (3, 9), (4, 16), (3, 21), (0, 1), (1, 17)], ids=str
)
def test_padding_to_buckets_matches_the_numpy_reference(shape):
    ids = np.random.default_rng(sum(shape)).integers(1, 50, size=shape).astype("int32")
    padded = buckets.pad_to_buckets(tf.constant(ids), (1, 2, 4), (8, 16), pad_id=0).numpy()
    np.testing.assert_array_equal(padded, reference_padding(ids, (1, 2, 4), (8, 16), 0))


def test_a_batch_beyond_the_largest_bucket_is_an_invalid_argument():
    with pytest.raises(tf.errors.InvalidArgumentError, match="largest batch bucket \\(4\\)"):
        buckets.pad_to_buckets(tf.zeros((5, 3), tf.int32), (1, 2, 4), (8,), pad_id=0)


def test_bucket_values():
    assert buckets.default_length_buckets(80) == (16, 32, 80)
    assert buckets.default_length_buckets(128) == (16, 32, 64, 128)
    assert buckets.default_length_buckets(50) == (16, 50)
    assert buckets.default_length_buckets(8) == (8,)
    assert buckets.batch_buckets() == (1, 8, 32)
    assert buckets.length_buckets((4, 10), 16) == (4, 10, 16)
    assert buckets.parse_buckets("1,2,4", "batch_buckets") == (1, 2, 4)
    assert [int(buckets.bucket_of(n, (2, 4, 8))) for n in (0, 1, 2, 3, 5, 8)] == [2, 2, 2, 4, 8, 8]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"batch_buckets": (4, 2)},
            "strictly increasing buckets. Received: batch_buckets=\\(4, 2\\)",
        ),
        ({"batch_buckets": (0, 2)}, "positive integer buckets. Received: batch_buckets=\\(0, 2\\)"),
        ({"batch_buckets": ()}, "at least one bucket. Received: batch_buckets=\\(\\)"),
        ({"length_buckets": (8, 32)}, "at most the 16 tokens .* length_buckets=\\(8, 32\\)"),
        (
            {"jit_compile": False, "length_buckets": (8,)},
            "length_buckets only apply to jit_compile",
        ),
    ],
)
def test_bad_buckets_are_config_errors(run, model, kwargs, message):
    source, target = run.tokenizers()
    with pytest.raises(ConfigError, match=message):
        Translator(
            model,
            get_family("rnn-attention").decoding_steps(model, 12),
            source,
            target,
            max_source_length=MAX_LENGTH,
            **{"jit_compile": True, **kwargs},
        )


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--jit-compile", "--batch-buckets", "1,x"],
            "comma-separated integers. Received: --batch-buckets 1,x",
        ),
        (
            ["--jit-compile", "--length-buckets", "8,4"],
            "strictly increasing buckets. Received: --length-buckets.\\(8, 4\\)",
        ),
        (["--batch-buckets", "1,2"], "--batch-buckets only apply to --jit-compile"),
    ],
)
def test_bad_bucket_flags_are_clear_errors(run, tmp_path, capsys, flags, message):
    assert cli(["export", str(run.path), "--model_base_path", str(tmp_path), *flags]) != 0
    assert not any(tmp_path.iterdir())
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(message, err), err


@pytest.mark.parametrize("decoder", ["greedy", "beam"])
def test_compiled_translations_equal_the_plain_ones_across_buckets(run, model, decoder):
    plain, compiled = translators(run, model, decoder=decoder, beam_size=3)
    batches = [  # batch buckets 2, 2, 4, 4
        TEST_SENTENCES[5:6],  # a short source: length bucket 12
        TEST_SENTENCES[1:3],
        [TEST_SENTENCES[3], "", TEST_SENTENCES[4]],
        [*TEST_SENTENCES[:3], " ".join(TEST_SENTENCES)],  # cut at 16 tokens, as the plain one
    ]
    widths = []
    for batch in batches:
        texts = tf.constant(batch)
        expected = plain.translate_with_alignment(texts)
        found = compiled.translate_with_alignment(texts)
        assert set(found) == set(expected)
        for name in ("translation", "tokens", "source_tokens"):
            np.testing.assert_array_equal(found[name].numpy(), expected[name].numpy())
        np.testing.assert_allclose(found["scores"], expected["scores"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(found["alignment"], expected["alignment"], atol=1e-5)
        widths.append(found["source_tokens"].shape[1])
    assert min(widths) <= 12 < max(widths) == MAX_LENGTH  # both length buckets
    with pytest.raises(tf.errors.InvalidArgumentError, match="largest batch bucket"):
        compiled.translate(tf.constant(TEST_SENTENCES[:5]))


def test_exported_compiled_translator_passes_the_contract_and_warms_every_bucket(
    run, plain, tmp_path
):
    flags = ["--max-output-length", "12", "--batch-buckets", "1,4", "--length-buckets", "8"]
    assert (
        cli(
            [
                "export",
                str(run.path),
                "--model_base_path",
                str(tmp_path / "compiled"),
                "--jit-compile",
                *flags,
            ]
        )
        == 0
    )  # fmt: skip  (the contract check runs in a tensorflow + tensorflow_text process)
    version = tmp_path / "compiled" / "1"
    graph = (version / "saved_model.pb").read_bytes()
    assert b"_XlaMustCompile" in graph

    records = read_warmup_records(warmup_path(str(version)))
    source, _ = run.tokenizers()
    word = filler_word(source)
    shapes = []
    for log in records[:4]:
        request = log.predict_log.request
        text = tf.make_ndarray(request.inputs["text"])
        lengths = source.tokenize(tf.constant(text)).row_lengths().numpy()
        shapes.append((request.model_spec.signature_name, len(text), int(lengths.max())))
        assert set(text) == {" ".join([word] * int(lengths.max())).encode()}
    assert shapes == [
        ("translate", 1, 8),
        ("translate", 1, 16),
        ("translate", 4, 8),
        ("translate", 4, 16),
    ]
    assert {log.predict_log.request.model_spec.signature_name for log in records[4:]} == {
        "serving_default",
        "translate",
        "translate_with_alignment",
    }

    # Loaded as keras-attn serve loads it: the warm-up compiles each bucket once, and requests
    # of every bucket compile nothing more, translating as the plain translator does.
    servable = load_servable("translator", str(tmp_path / "compiled"), 1)
    before = xla_compilations()
    run_warmup(servable)
    assert xla_compilations() - before == 2 * 2  # (1, 4) x (8, 16): once each
    after_warmup = xla_compilations()
    translate = servable.functions.get("translate")
    for batch in (1, 2, 3, 4):
        texts = TEST_SENTENCES[batch - 1 : 2 * batch - 1]
        found = translate(text=np.array([text.encode() for text in texts], object))
        expected = plain.translate(tf.constant(texts))
        for name in ("translation", "tokens"):
            np.testing.assert_array_equal(found[name], expected[name].numpy())
    assert xla_compilations() == after_warmup


# A server process: load the version as `keras-attn serve` does, warm it up, translate.
SERVE_ONCE = """
import json, sys
import numpy as np
from keras_attn.serving.servable import load_servable
from keras_attn.serving.warmup import run_warmup
servable = load_servable("translator", sys.argv[1], 1)
run_warmup(servable)
texts = np.array([text.encode() for text in sys.argv[2:]], object)
found = servable.functions.get("translate")(text=texts)
print(json.dumps(found["translation"].tolist(), default=bytes.decode))
"""


def test_compiled_executables_are_cached_across_server_restarts(run, plain, tmp_path):
    # TensorFlow's persistent XLA cache (docs/serving.md): the first server process writes one
    # executable per bucket, a restarted one loads them and translates as the plain export.
    # One batch bucket of 2: the export's warm-up and contract requests fit it too.
    base = tmp_path / "compiled"
    flags = ["--max-output-length", "12", "--batch-buckets", "2", "--length-buckets", "16"]
    assert (
        cli(["export", str(run.path), "--model_base_path", str(base), "--jit-compile", *flags]) == 0
    )
    cache = tmp_path / "xla-cache"
    env = dict(
        os.environ,
        TF_CPP_MIN_LOG_LEVEL="3",
        TF_XLA_FLAGS=f"--tf_xla_persistent_cache_directory={cache}",
    )
    texts = TEST_SENTENCES[:2]
    expected = [t.decode() for t in plain.translate(tf.constant(texts))["translation"].numpy()]
    entries = []
    for _ in range(2):
        served = subprocess.run(
            [sys.executable, "-c", SERVE_ONCE, str(base), *texts],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert served.returncode == 0, served.stderr[-2000:]
        assert json.loads(served.stdout.splitlines()[-1]) == expected
        entries.append({p.name: p.stat().st_mtime_ns for p in cache.iterdir()})
    assert len(entries[0]) == 1  # one bucket, one executable
    assert entries[1] == entries[0]  # read back, not compiled and written again


def test_a_compiled_generator_generates_as_the_plain_one(tiny_pairs):
    tokenizer = WordPieceTokenizer(build_wordpiece_vocab([t for _, t in tiny_pairs], 300))
    model = gpt(tokenizer.vocab_size, num_layers=1, d_model=8, num_heads=2, ff_dim=16,
                max_length=16, dropout=0.0)  # fmt: skip
    steps = GPTSteps(model, max_length=16)
    common = dict(max_prompt_length=8, max_output_length=6)
    plain = Generator(model, steps, tokenizer, **common)
    compiled = Generator(
        model, steps, tokenizer, jit_compile=True, batch_buckets=(4,), length_buckets=(4,), **common
    )
    assert compiled.length_buckets == (4, 9)  # START + 8 prompt tokens is the last
    for prompts in (["the black cat", "a dog", ""], ["the cat sat on the black dog today"]):
        expected = plain.generate(tf.constant(prompts))
        found = compiled.generate(tf.constant(prompts))
        for name in ("continuation", "tokens"):
            np.testing.assert_array_equal(found[name].numpy(), expected[name].numpy())
        np.testing.assert_allclose(found["scores"], expected["scores"], rtol=1e-5, atol=1e-5)
    # Sampling: the options reach the compiled loop (greedy at temperature 0, length capped).
    options = compiled.generate_with_options(tf.constant(["a dog"]), 2, 0.0, 0, 1.0)
    np.testing.assert_array_equal(
        options["tokens"].numpy(), plain.generate(tf.constant(["a dog"]))["tokens"].numpy()[:, :2]
    )
