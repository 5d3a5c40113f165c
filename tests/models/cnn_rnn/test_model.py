"""The `cnn-rnn` family: `ConvolutionalEncoder` against a NumPy reference (masking before every
convolution, residuals scaled by sqrt(0.5)), padding that changes nothing, the RNN step view
equal to teacher forcing, and `keras-attn train` then `keras-attn export` of a run."""

from __future__ import annotations

import inspect
import json

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.formats import RunDirectory
from keras_attn.models import RNNTranslatorSteps, get_family
from keras_attn.models.cnn_rnn.family import CNNTranslatorOptions
from keras_attn.models.cnn_rnn.model import ConvolutionalEncoder, cnn_translator
from keras_attn.models.family import MODEL_FAMILIES
from keras_attn.testing import run_layer_test
from tests.lazy_tf import tf
from tests.numpy_reference import sigmoid
from tests.training.conftest import tiny_corpus  # noqa: F401  (a fixture)

SOURCE = np.array([[5, 6, 7, 8, 0], [9, 4, 0, 0, 0]], "int32")
TARGET = np.array([[2, 11, 12, 13], [2, 14, 0, 0]], "int32")
REAL_TARGET = TARGET != 0


def convolve_same(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """A stride-1 convolution `(batch, T, c_in) -> (batch, T, c_out)` with "same" padding:
    `(k - 1) // 2` zeros before the first position, the rest after the last."""
    width = kernel.shape[0]
    before = (width - 1) // 2
    padded = np.pad(x, ((0, 0), (before, width - 1 - before), (0, 0)))
    steps = x.shape[1]
    return bias + sum(padded[:, j : j + steps] @ kernel[j] for j in range(width))


def reference_block(z, keep, kernel, bias, activation):
    """One block of Gehring et al.: `(act(conv(z ⊙ m)) + z) · sqrt(0.5)`."""
    h = convolve_same(z * keep, kernel, bias)
    if activation == "glu":
        a, b = np.split(h, 2, axis=-1)
        h = a * sigmoid(b)
    else:
        h = np.maximum(h, 0.0)
    return (h + z) * np.sqrt(0.5)


@pytest.mark.parametrize(
    "activation, positions, kernel_width",
    [("glu", "learned", 3), ("relu", "sinusoidal", 2), ("glu", "learned", 5)],
)
def test_encoder_matches_the_numpy_blocks(activation, positions, kernel_width):
    keras.utils.set_random_seed(1)
    rng = np.random.default_rng(0)
    units, dim, steps = 4, 3, 6
    inputs = rng.normal(size=(2, steps, dim)).astype("float32")  # padding holds noise too
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    encoder = ConvolutionalEncoder(
        units, kernel_width=kernel_width, num_layers=2, activation=activation,
        positions=positions, max_positions=4, num_states=3,
    )  # fmt: skip
    encoder.build(inputs.shape)
    for weight in encoder.weights:  # biases too, so a padded position is never zero by chance
        weight.assign(rng.normal(scale=0.5, size=weight.shape).astype("float32"))
    memory, *states = encoder(inputs, mask=mask)

    if positions == "learned":  # positions from max_positions - 1 on share the last vector
        table = ops.convert_to_numpy(encoder.position_embeddings)
        added = table[np.minimum(np.arange(steps), 3)]
    else:
        added = keras.ops.convert_to_numpy(encoder.position_encoding(inputs))[0]
    keep = mask[..., None].astype("float32")
    projection = encoder.input_projection
    z = (
        (inputs + added) @ ops.convert_to_numpy(projection.kernel)
        + ops.convert_to_numpy(projection.bias)
    ) * keep
    blocks = [
        (ops.convert_to_numpy(c.kernel), ops.convert_to_numpy(c.bias)) for c in encoder.convolutions
    ]
    for kernel, bias in blocks:
        z_in = z
        z = reference_block(z_in, keep, kernel, bias, activation)
    expected = z * keep
    mean = expected.sum(axis=1) / keep.sum(axis=1)
    np.testing.assert_allclose(ops.convert_to_numpy(memory), expected, rtol=1e-5, atol=1e-5)
    assert len(states) == 3
    for state in states:
        np.testing.assert_allclose(ops.convert_to_numpy(state), mean, rtol=1e-5, atol=1e-5)
    # Without the zeroing before the second convolution, the first sentence's last real
    # position would read the first block's nonzero output at the padding.
    leaked = reference_block(z_in, np.ones_like(keep), *blocks[-1], activation)
    assert np.abs(z_in[0, 4:]).max() > 0
    assert not np.allclose(leaked[0, 3], expected[0, 3], atol=1e-3)


@pytest.mark.parametrize(
    "activation, positions",
    [("glu", "learned"), pytest.param("relu", "sinusoidal", marks=pytest.mark.every_backend)],
)
def test_encoder_harness(activation, positions):
    """The shared layer checks: config, .keras, SavedModel, both mixed policies, masking."""
    x = np.random.default_rng(0).normal(size=(2, 5, 4)).astype("float32")
    mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    run_layer_test(
        ConvolutionalEncoder,
        {
            "units": 6,
            "kernel_width": 3,
            "num_layers": 2,
            "activation": activation,
            "positions": positions,
            "max_positions": 8,
            "num_states": 2,
        },  # fmt: skip
        {"inputs": x},
        mask=mask,
        padded_input="inputs",
        mask_kwarg="mask",
        weights_kwarg=None,
        expected_output_shape=((2, 5, 6), (2, 6), (2, 6)),
        atol=1e-5,
        rtol=1e-5,
    )


def test_encoder_arguments_are_checked_and_its_config_round_trips():
    for arguments, message in [
        ({"kernel_width": 0}, "positive int kernel_width. Received: kernel_width=0"),
        ({"num_layers": True}, "positive int num_layers"),
        ({"activation": "tanh"}, "Received: activation='tanh'"),
        ({"positions": "rotary"}, "Received: positions='rotary'"),
        ({"dropout": 1.0}, "Received: dropout=1.0"),
    ]:
        with pytest.raises(ValueError, match=message):
            ConvolutionalEncoder(8, **arguments)
    encoder = ConvolutionalEncoder(8, kernel_width=5, positions="sinusoidal", num_states=2)
    config = encoder.get_config()
    assert ConvolutionalEncoder.from_config(config).get_config() == config
    assert keras.saving.get_registered_object("keras_attn>ConvolutionalEncoder") is (
        ConvolutionalEncoder
    )


def build(cell="lstm", decoder_layers=1, **options) -> keras.Model:
    keras.utils.set_random_seed(0)
    return cnn_translator(
        20, 20, embedding_dim=6, units=8, num_layers=2, cell=cell,
        decoder_layers=decoder_layers, dropout=0.0, **options,
    )  # fmt: skip


def test_appended_padding_changes_neither_memory_nor_logits():
    model = build()
    steps = RNNTranslatorSteps(model)
    short = SOURCE[:, :4]
    padded = np.concatenate([SOURCE, np.zeros((2, 3), "int32")], axis=1)
    encoded = {name: steps.encode(ids) for name, ids in (("short", short), ("padded", padded))}
    real = (short != 0)[..., None]
    np.testing.assert_allclose(
        ops.convert_to_numpy(encoded["padded"]["memory"])[:, :4] * real,
        ops.convert_to_numpy(encoded["short"]["memory"]) * real,
        atol=1e-6,
    )
    assert not ops.convert_to_numpy(encoded["padded"]["memory"])[:, 4:].any()
    for short_state, padded_state in zip(
        encoded["short"]["states"], encoded["padded"]["states"], strict=True
    ):
        np.testing.assert_allclose(
            ops.convert_to_numpy(padded_state), ops.convert_to_numpy(short_state), atol=1e-6
        )
    logits = [
        ops.convert_to_numpy(model({"source_ids": ids, "target_ids": TARGET}))
        for ids in (short, padded)
    ]
    np.testing.assert_allclose(logits[1][REAL_TARGET], logits[0][REAL_TARGET], atol=1e-5)
    # A real token in place of the padding does change the memory: the check above can fail.
    other = padded.copy()
    other[1, 2] = 7
    changed = ops.convert_to_numpy(steps.encode(other)["memory"])[1, 1]
    assert not np.allclose(
        changed, ops.convert_to_numpy(encoded["padded"]["memory"])[1, 1], atol=1e-4
    )


@pytest.mark.tensorflow_only
@pytest.mark.parametrize(
    "cell, decoder_layers, options",
    [("lstm", 1, {}), ("gru", 2, {"activation": "relu", "positions": "sinusoidal"})],
)
def test_the_rnn_step_view_equals_teacher_forcing_after_a_reload(
    tmp_path, cell, decoder_layers, options
):
    model = build(cell, decoder_layers, **options)
    assert model.get_layer("encoder").num_states == decoder_layers * (2 if cell == "lstm" else 1)
    forced = ops.convert_to_numpy(model({"source_ids": SOURCE, "target_ids": TARGET}))
    path = tmp_path / "model.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    steps = RNNTranslatorSteps(reloaded)
    state = steps.encode(SOURCE)
    stepped = []
    for t in range(TARGET.shape[1]):
        logits, state = steps.step(tf.constant(TARGET[:, t]), state)
        stepped.append(ops.convert_to_numpy(logits))
    stepped = np.stack(stepped, axis=1)
    np.testing.assert_allclose(stepped[REAL_TARGET], forced[REAL_TARGET], rtol=1e-5, atol=1e-5)
    attention = ops.convert_to_numpy(state["attention"])
    assert not attention[SOURCE == 0].any()  # padded source positions get zero weight
    np.testing.assert_allclose(attention.sum(axis=-1), 1.0, rtol=1e-5)


def test_the_family_options_are_the_builders_keywords_and_are_checked():
    family = get_family("cnn-rnn")
    assert (family.kind, family.exportable, family.options) == (
        "translator", True, CNNTranslatorOptions,
    )  # fmt: skip
    parameters = inspect.signature(cnn_translator).parameters
    assert family.builder_defaults() == {
        name: parameters[name].default for name in family.option_names
    }
    assert family.training_defaults() == {
        "learning_rate": 2e-3, "warmup_steps": 200, "schedule": "cosine",
    }  # fmt: skip
    for given, message in [
        ({"kernel_width": 0}, "kernel_width must be >= 1, got 0"),
        ({"activation": "tanh"}, "activation must be one of glu, relu, got 'tanh'"),
        ({"positions": "rotary"}, "positions must be one of learned, sinusoidal"),
        ({"num_layers": 2.5}, "num_layers must be a int, got 2.5"),
    ]:
        with pytest.raises(ConfigError, match=message):
            family.option_values(given)
    assert "cnn-rnn" in MODEL_FAMILIES


@pytest.mark.tensorflow_only
def test_keras_attn_train_then_export(tmp_path, tiny_corpus):  # noqa: F811
    run = tmp_path / "run"
    flags = [
        "--corpus", str(tiny_corpus), "--steps", "20", "--batch-size", "16",
        "--vocab-size", "60", "--eval-sentences", "4", "--checkpoint-every", "10",
        "--warmup-steps", "5", "--quiet",
        # The family's options are flags of `train` (--units and --num-layers: its own).
        "--units", "24", "--embedding-dim", "8", "--num-layers", "2", "--kernel-width", "5",
    ]  # fmt: skip
    assert cli(["train", "--model", "cnn-rnn", *flags, "--out", str(run)]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["model"] == "cnn-rnn"
    assert {k: config["options"][k] for k in ("units", "embedding_dim", "num_layers")} == {
        "units": 24, "embedding_dim": 8, "num_layers": 2,
    }  # fmt: skip
    assert config["options"]["kernel_width"] == 5
    assert RunDirectory(run).load_model().get_layer("decoder").units == 24
    assert (config["learning_rate"], config["schedule"]) == (2e-3, "cosine")  # the family's
    assert config["warmup_steps"] == 5
    losses = [
        float(line.split("\t")[1]) for line in (run / "train_log.tsv").read_text().splitlines()[1:]
    ]
    assert len(losses) == 20 and np.mean(losses[-5:]) < np.mean(losses[:5])
    base = tmp_path / "models"
    assert cli(["export", str(run), "--model_base_path", str(base)]) == 0
    loaded = tf.saved_model.load(str(base / "1"))
    out = loaded.signatures["translate_with_alignment"](
        text=tf.constant(["el gato 7 come pan", "el gato 19 come pan tambien"])
    )
    assert out["translation"].dtype == tf.string and out["translation"].shape == (2,)
    assert np.all(np.isfinite(ops.convert_to_numpy(out["scores"])))
    alignment = ops.convert_to_numpy(out["alignment"])  # (2, target_len, source_len)
    tokens = ops.convert_to_numpy(out["tokens"])
    real = tokens != b""
    np.testing.assert_allclose(alignment.sum(axis=-1)[real], 1.0, rtol=1e-4)


def test_the_module_older_keras_files_record_still_holds_the_encoder():
    from keras_attn.models import cnn_translator as recorded

    assert recorded.ConvolutionalEncoder is ConvolutionalEncoder
