"""The rnn builders' `encoder_direction="uni"` and `reverse_source`: a unidirectional encoder
stack, optionally over the reversed source (Sutskever et al., 2014; Luong et al., 2015)."""

import shlex
from pathlib import Path

import keras
import numpy as np
import pytest

from keras_attn.cli import build_parser
from keras_attn.decoding import greedy_search
from keras_attn.errors import ConfigError
from keras_attn.layers import BidirectionalEncoder, UnidirectionalEncoder
from keras_attn.models import (
    LuongTranslatorSteps,
    PlainTranslatorSteps,
    RNNTranslatorSteps,
    rnn_attention_translator,
    rnn_luong_translator,
    rnn_plain_translator,
)
from keras_attn.training.cli import requested_config
from keras_attn.training.config import TrainConfig

SOURCE = np.array([[5, 6, 7, 8, 0], [9, 4, 0, 0, 0]], "int32")
TARGET = np.array([[2, 11, 12, 13], [2, 14, 15, 0]], "int32")

BUILDERS = {
    "rnn-attention": (rnn_attention_translator, RNNTranslatorSteps),
    "rnn-luong": (rnn_luong_translator, LuongTranslatorSteps),
    "rnn-plain": (rnn_plain_translator, PlainTranslatorSteps),
}


def tiny(family, **kwargs):
    keras.utils.set_random_seed(0)
    build, steps = BUILDERS[family]
    model = build(20, 30, **{"embedding_dim": 6, "units": 7, "dropout": 0.3, **kwargs})
    return model, steps(model)


@pytest.mark.parametrize("family", sorted(BUILDERS))
@pytest.mark.parametrize("reverse_source", [False, True])
@pytest.mark.parametrize("num_layers", [1, 3])
def test_step_view_and_greedy_decoding_match_the_teacher_forced_model(
    family, reverse_source, num_layers
):
    model, steps = tiny(
        family, encoder_direction="uni", reverse_source=reverse_source, num_layers=num_layers
    )
    encoder = model.get_layer("encoder")
    assert isinstance(encoder, UnidirectionalEncoder)
    assert (encoder.units, encoder.reverse, encoder.num_layers) == (7, reverse_source, num_layers)
    logits = keras.ops.convert_to_numpy(model({"source_ids": SOURCE, "target_ids": TARGET}))
    state = steps.encode(SOURCE)
    for t in range(TARGET.shape[1]):
        logits_t, state = steps.step(TARGET[:, t], state)
        real = TARGET[:, t] != 0
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(logits_t)[real], logits[real, t], rtol=1e-5, atol=1e-5
        )
    # Greedy decoding picks the argmax of the teacher-forced model on its own prefix.
    greedy = greedy_search(steps.step, steps.encode(SOURCE), 2, start_id=2, end_id=3, max_length=6)
    ids, lengths = (
        keras.ops.convert_to_numpy(greedy.ids),
        keras.ops.convert_to_numpy(greedy.lengths),
    )
    prefix = np.concatenate([np.full((2, 1), 2, "int32"), ids[:, :-1]], axis=1)
    forced = keras.ops.convert_to_numpy(model({"source_ids": SOURCE, "target_ids": prefix}))
    forced[..., [0, 2]] = -np.inf  # padding and START are never generated
    for row in range(2):
        np.testing.assert_array_equal(
            forced[row, : lengths[row]].argmax(-1), ids[row, : lengths[row]]
        )


def test_reversed_memory_is_in_source_order_and_differs_from_forward():
    model, steps = tiny("rnn-luong", encoder_direction="uni", reverse_source=True)
    embedded = model.get_layer("source_embedding")(SOURCE)
    memory, h, c = model.get_layer("encoder")(embedded, mask=SOURCE != 0)
    # Row 1 read alone, backwards: its memory and final states are those of the padded batch.
    alone, h_alone, _ = model.get_layer("encoder")(embedded[1:, :2])
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(memory)[1, :2],
        keras.ops.convert_to_numpy(alone)[0],
        rtol=1e-5,
        atol=1e-6,
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(h)[1],
        keras.ops.convert_to_numpy(h_alone)[0],
        rtol=1e-5,
        atol=1e-6,
    )
    forward, _ = tiny("rnn-luong", encoder_direction="uni")
    forward.set_weights(model.get_weights())
    inputs = {"source_ids": SOURCE, "target_ids": TARGET}
    assert (
        np.abs(
            keras.ops.convert_to_numpy(forward(inputs)) - keras.ops.convert_to_numpy(model(inputs))
        ).max()
        > 1e-4
    )


def test_bidirectional_default_is_unchanged_and_reverse_needs_uni():
    model, _ = tiny("rnn-attention", units=8)
    encoder = model.get_layer("encoder")
    assert type(encoder) is BidirectionalEncoder and encoder.units == 4
    assert "reverse" not in encoder.get_config()
    with pytest.raises(ValueError, match="reverse_source needs encoder_direction='uni'"):
        rnn_luong_translator(20, 30, reverse_source=True)
    with pytest.raises(ValueError, match="encoder_direction='both'"):
        rnn_luong_translator(20, 30, encoder_direction="both")
    with pytest.raises(ConfigError, match="reverse_source needs") as caught:
        TrainConfig(model="rnn-luong", options={"reverse_source": True}).validate()
    assert set(caught.value.fields) == {"reverse_source", "encoder_direction"}
    TrainConfig(
        model="rnn-plain", options={"encoder_direction": "uni", "reverse_source": True}
    ).validate()


def test_a_reversed_encoder_survives_a_keras_round_trip(tmp_path):
    model, _ = tiny("rnn-luong", encoder_direction="uni", reverse_source=True, num_layers=2)
    path = tmp_path / "uni.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    assert loaded.get_layer("encoder").reverse is True
    inputs = {"source_ids": SOURCE, "target_ids": TARGET}
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(inputs)),
        keras.ops.convert_to_numpy(model(inputs)),
        atol=1e-6,
    )


def luong_parameters(source_vocab, target_vocab, embedding_dim, units, layers):
    """rnn-luong's parameters, unidirectional LSTM encoder, global attention with the general
    score and input feeding, written out from the architecture."""

    def lstm(inputs):  # four gates: input kernel, recurrent kernel, bias
        return 4 * ((inputs + units) * units + units)

    embeddings = (source_vocab + target_vocab) * embedding_dim
    encoder = lstm(embedding_dim) + (layers - 1) * lstm(units)
    bridges = 2 * layers * (units * units + units)  # tanh(W s + b) per (h, c) of each layer
    decoder = lstm(embedding_dim + units) + (layers - 1) * lstm(units)  # h~_{t-1} fed below
    general_score = units * units  # W_a
    attentional_state = 2 * units * units  # W_c [c_t; h_t], no bias
    projection = units * target_vocab + target_vocab  # W_s
    return embeddings + encoder + bridges + decoder + general_score + attentional_state + projection


LUONG_ET_AL = 229_090_000  # 4 layers, 1000 units, 1000-dim embeddings, 50,000-word vocabularies


def test_parameter_count_of_luong_et_al_configuration():
    for sizes in [(20, 30, 6, 7, 4), (50, 40, 10, 12, 1), (33, 17, 5, 9, 2)]:
        source_vocab, target_vocab, embedding_dim, units, layers = sizes
        model = rnn_luong_translator(
            source_vocab, target_vocab, embedding_dim=embedding_dim, units=units,
            num_layers=layers, encoder_direction="uni", reverse_source=True,
        )  # fmt: skip
        assert model.count_params() == luong_parameters(*sizes), sizes
    # The formula, checked on the built models above, at the paper's size (building that model
    # allocates 0.9 GB of weights, which the suite's parallel workers can do without).
    assert luong_parameters(50_000, 50_000, 1000, 1000, 4) == LUONG_ET_AL


def test_the_documented_command_parses_to_luong_et_al_configuration():
    docs = (Path(__file__).resolve().parents[3] / "docs" / "recurrent.md").read_text("utf-8")
    lines = docs.replace("\\\n", " ").splitlines()
    (line,) = [line for line in lines if "--encoder-direction uni" in line and "--vocab" in line]
    command = line[line.index("`keras-attn train") + 1 :].split("`")[0]
    config = requested_config(build_parser().parse_args(shlex.split(command)[1:]))
    config.validate()
    options = config.model_hyperparameters()
    assert (config.model, options["encoder_direction"], options["num_layers"]) == (
        "rnn-luong",
        "uni",
        4,
    )
    assert (options["units"], options["embedding_dim"], config.vocab_size) == (1000, 1000, 50_000)
    assert f"{LUONG_ET_AL:,}" in line
