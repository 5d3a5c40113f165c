"""`rnn_lm` and the `rnn-lm` family: a recurrent language model (Mikolov et al., 2010; Graves,
2013) checked against a NumPy LSTM language model, saved and reloaded, and its options."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.cli import main as cli
from keras_attn.errors import ConfigError
from keras_attn.layers import UnidirectionalEncoder
from keras_attn.models import RNNLMSteps, get_family, rnn_lm
from keras_attn.models.family_options import BUILT_IN_OPTIONS
from keras_attn.models.rnn_lm.options import RNNLMOptions
from tests import numpy_reference as ref

VOCAB = 24
IDS = np.array([[2, 5, 6, 7, 8, 9], [2, 10, 11, 0, 0, 0]], "int32")  # right-padded with 0
REAL = IDS != 0


def tiny(**options):
    keras.utils.set_random_seed(0)
    return rnn_lm(VOCAB, **{"embedding_dim": 6, "units": 8, "dropout": 0.0, **options})


def copy_random_weights(model, seed):
    """Draw every weight (scale 0.5, so that the gates leave their linear range), set it in the
    model and return the arrays: embedding, `(kernel, recurrent kernel, bias)` per layer, output
    kernel and bias."""
    rng = np.random.default_rng(seed)

    def draw(layer):
        values = [rng.normal(scale=0.5, size=w.shape).astype("float32") for w in layer.weights]
        layer.set_weights(values)
        return values

    embedding = draw(model.get_layer("embedding"))[0]
    layers = [draw(rnn) for rnn in model.get_layer("rnn").rnns]
    kernel, bias = draw(model.get_layer("logits"))
    return embedding, layers, kernel, bias


def numpy_lm(embedding, layers, kernel, bias, ids):
    """The forward pass in float64: x = E[ids]; stacked LSTMs over the real tokens, each layer
    from the third up adding its input (the stack's residual connections); h_L W + b."""
    mask = ids != 0
    hidden = embedding.astype("float64")[ids]  # (batch, T, embedding_dim)
    for index, weights in enumerate(layers):
        sequence, _, _ = ref.lstm_sequence(hidden, mask, *(w.astype("float64") for w in weights))
        hidden = sequence + hidden if index >= 2 else sequence
    return hidden @ kernel.astype("float64") + bias.astype("float64")  # (batch, T, V)


@pytest.mark.parametrize("num_layers", [1, 2, 3])
def test_matches_a_numpy_lstm_language_model_with_copied_weights(num_layers):
    model = tiny(num_layers=num_layers)
    weights = copy_random_weights(model, seed=num_layers)
    logits = ops.convert_to_numpy(model(IDS))
    assert logits.shape == (2, 6, VOCAB) and logits.dtype == np.float32
    expected = numpy_lm(*weights, IDS)
    # float32 against float64 sums of at most 6 + 8 products per unit and step
    np.testing.assert_allclose(logits[REAL], expected[REAL], rtol=1e-5, atol=1e-5)


def test_no_position_sees_the_future_and_padding_changes_nothing():
    model = tiny(num_layers=2)
    base = ops.convert_to_numpy(model(IDS[:1]))
    for k in range(1, 6):
        changed = IDS[:1].copy()
        changed[0, k] = 4 + (changed[0, k] - 3) % (VOCAB - 4)  # another real token
        out = ops.convert_to_numpy(model(changed))
        np.testing.assert_array_equal(out[:, :k], base[:, :k])
        assert np.abs(out[:, k:] - base[:, k:]).max(axis=-1).min() > 1e-5
    short = ops.convert_to_numpy(model(IDS[1:, :3]))
    padded = ops.convert_to_numpy(model(IDS[1:]))
    np.testing.assert_allclose(padded[:, :3], short, rtol=1e-6, atol=1e-6)


def test_the_cell_option_chooses_lstm_or_gru_layers():
    for cell, rnn_type, states in (("lstm", keras.layers.LSTM, 2), ("gru", keras.layers.GRU, 1)):
        stack = tiny(cell=cell, num_layers=3).get_layer("rnn")
        assert isinstance(stack, UnidirectionalEncoder)
        assert all(type(rnn) is rnn_type for rnn in stack.rnns) and len(stack.rnns) == 3
        assert stack.states_per_layer == states and stack.layer_dropout == 0.0
    assert tiny(num_layers=2, dropout=0.2).get_layer("rnn").layer_dropout == 0.2
    assert tiny(num_layers=1, dropout=0.2).get_layer("rnn").layer_dropout == 0.0


def test_a_keras_file_round_trip_keeps_outputs_and_the_step_view(tmp_path):
    model = tiny(cell="gru", num_layers=2, dropout=0.1)
    copy_random_weights(model, seed=7)
    path = tmp_path / "lm.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)  # no custom_objects: every layer is registered
    assert keras.saving.get_registered_name(type(loaded.get_layer("rnn"))) == (
        "keras_attn>UnidirectionalEncoder"
    )
    np.testing.assert_array_equal(
        ops.convert_to_numpy(loaded(IDS)), ops.convert_to_numpy(model(IDS))
    )
    states = [RNNLMSteps(m).prefill(IDS) for m in (model, loaded)]
    np.testing.assert_array_equal(
        ops.convert_to_numpy(states[0]["prompt_logits"]),
        ops.convert_to_numpy(states[1]["prompt_logits"]),
    )


def test_the_family_builds_it_and_decodes_with_its_step_view():
    family = get_family("rnn-lm")
    assert (family.kind, family.task, family.exportable) == ("generator", "language_model", True)
    assert family.steps is RNNLMSteps and not family.sized_steps
    assert family.options is RNNLMOptions is BUILT_IN_OPTIONS["rnn-lm"]
    assert family.builder_defaults() == {
        "embedding_dim": 128, "units": 256, "cell": "lstm", "num_layers": 2, "dropout": 0.1,
    }  # fmt: skip
    # The language-model task passes the positions it gives a GPT; a recurrent model ignores them.
    model = family.build(VOCAB, max_length=12, embedding_dim=4, units=8, num_layers=1)
    assert model.name == "rnn_lm" and tuple(model.output.shape) == (None, None, VOCAB)
    assert isinstance(family.decoding_steps(model, 40), RNNLMSteps)


@pytest.mark.parametrize(
    "options, message, fields",
    [
        ({"cell": "rnn"}, "cell must be one of lstm, gru, got 'rnn'", ("cell",)),
        ({"units": 0}, "units must be positive, got 0", ("units",)),
        ({"num_layers": 1.5}, "num_layers must be a int, got 1.5", ("num_layers",)),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0", ("dropout",)),
        ({"d_model": 8}, "d_model does not apply to model='rnn-lm'", None),
    ],
)
def test_bad_options_are_config_errors(options, message, fields):
    with pytest.raises(ConfigError, match=message) as caught:
        get_family("rnn-lm").option_values(options)
    if fields is not None:
        assert caught.value.fields == fields


def test_bad_arguments_of_the_builder_are_value_errors():
    with pytest.raises(ValueError, match="Expected cell in"):
        rnn_lm(VOCAB, cell="rnn")
    with pytest.raises(ValueError, match="Expected num_layers to be a positive integer"):
        rnn_lm(VOCAB, num_layers=0)


def test_a_bad_flag_is_one_line_before_the_run_directory_exists(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli(["train", "--model", "rnn-lm", "--units", "0", "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error == "keras-attn train: error: --units must be positive, got 0"
    assert not out.exists()
