"""The rnn builders' `num_layers`: stacked encoders and decoders, their step views and decoding.

Each encoder layer's final states initialise the decoder layer of the same depth; the step
views carry every layer's state, so greedy and beam search drive a model of any depth.
"""

import shlex
from pathlib import Path

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.cli import build_parser
from keras_attn.decoding import beam_search, greedy_search, sample
from keras_attn.errors import ConfigError
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
    model = build(20, 30, embedding_dim=6, units=8, dropout=0.3, **kwargs)
    return model, steps(model)


@pytest.mark.parametrize("num_layers", [2, 4])
@pytest.mark.parametrize(
    "family,kwargs",
    [
        ("rnn-attention", {}),
        ("rnn-attention", {"cell": "gru"}),
        ("rnn-luong", {}),
        ("rnn-luong", {"cell": "gru", "attention": "local-m", "window": 1}),
        ("rnn-luong", {"input_feeding": False, "attention": "local-p", "window": 2}),
        ("rnn-plain", {}),
        ("rnn-plain", {"cell": "gru", "context_feeding": False}),
    ],
    ids=["bahdanau", "bahdanau-gru", "luong", "luong-gru-local-m", "luong-fast-local-p", "plain",
         "plain-gru-sutskever"],
)  # fmt: skip
def test_step_view_reproduces_the_teacher_forced_logits(family, kwargs, num_layers):
    model, steps = tiny(family, num_layers=num_layers, **kwargs)
    decoder, encoder = model.get_layer("decoder"), model.get_layer("encoder")
    assert decoder.num_layers == encoder.num_layers == num_layers
    per_layer = 1 if kwargs.get("cell") == "gru" else 2
    assert encoder.num_states == decoder.num_initial_states == per_layer * num_layers
    logits = ops.convert_to_numpy(model({"source_ids": SOURCE, "target_ids": TARGET}))
    state = steps.encode(SOURCE)
    assert len(state["states"]) >= per_layer * num_layers  # every layer's (h, c)
    for t in range(TARGET.shape[1]):
        logits_t, state = steps.step(TARGET[:, t], state)
        real = TARGET[:, t] != 0
        np.testing.assert_allclose(
            ops.convert_to_numpy(logits_t)[real], logits[real, t], rtol=1e-5, atol=1e-5
        )


def test_each_encoder_layer_bridges_to_its_decoder_layer_and_plain_reads_the_top():
    model, steps = tiny("rnn-plain", num_layers=3)
    embedded = model.get_layer("source_embedding")(SOURCE)
    _, *final = model.get_layer("encoder")(embedded, mask=SOURCE != 0)
    state = steps.encode(SOURCE)
    assert len(final) == len(state["states"]) == 6
    for index, (ours, theirs) in enumerate(zip(state["states"], final, strict=True)):
        expected = ops.convert_to_numpy(model.get_layer(f"bridge_{index}")(theirs))
        np.testing.assert_allclose(ops.convert_to_numpy(ours), expected, rtol=1e-6, atol=1e-6)
    # c is the final hidden state of the top encoder layer, not of the bottom one.
    np.testing.assert_allclose(
        ops.convert_to_numpy(state["context"]), ops.convert_to_numpy(final[4]), rtol=1e-6
    )
    assert np.abs(ops.convert_to_numpy(final[4]) - ops.convert_to_numpy(final[0])).max() > 1e-3


def test_layer_names_of_a_stack_and_the_unchanged_single_layer():
    deep, _ = tiny("rnn-luong", num_layers=3)
    paths = [weight.path for weight in deep.weights]
    for name in ("encoder/bidirectional_2/", "encoder/bidirectional_3/", "decoder/rnn_2/",
                 "decoder/rnn_3/", "bridge_5/"):  # fmt: skip
        assert any(path.startswith(name) for path in paths), name
    assert not any(path.startswith(("decoder/rnn_4/", "bridge_6/")) for path in paths)
    single, _ = tiny("rnn-luong")
    paths = [weight.path for weight in single.weights]
    assert not any("bidirectional_2" in path or "rnn_2" in path for path in paths)
    for name in ("encoder", "decoder"):
        config = single.get_layer(name).get_config()
        assert "num_layers" not in config and "layer_dropout" not in config
        deep_config = deep.get_layer(name).get_config()
        assert (deep_config["num_layers"], deep_config["layer_dropout"]) == (3, 0.3)


def test_a_four_layer_luong_translator_survives_a_keras_round_trip(tmp_path):
    model, _ = tiny("rnn-luong", num_layers=4, cell="gru", reset_after=False)
    path = tmp_path / "deep.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    assert loaded.get_layer("decoder").num_layers == 4
    inputs = {"source_ids": SOURCE, "target_ids": TARGET}
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded(inputs)), ops.convert_to_numpy(model(inputs)), atol=1e-6
    )
    steps = LuongTranslatorSteps(loaded)
    greedy = greedy_search(steps.step, steps.encode(SOURCE), 2, start_id=2, end_id=3, max_length=5)
    assert greedy.ids.shape == (2, 5)


@pytest.mark.parametrize("family", ["rnn-attention", "rnn-luong", "rnn-plain"])
def test_greedy_beam_and_sampling_drive_a_deep_model(family):
    model, steps = tiny(family, num_layers=2)
    greedy = greedy_search(steps.step, steps.encode(SOURCE), 2, start_id=2, end_id=3, max_length=6)
    beam = beam_search(
        steps.step, steps.encode(SOURCE), 2, start_id=2, end_id=3, max_length=6, beam_size=1
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(beam.ids), ops.convert_to_numpy(greedy.ids))
    np.testing.assert_allclose(
        ops.convert_to_numpy(beam.scores), ops.convert_to_numpy(greedy.scores), rtol=1e-5
    )
    wide = beam_search(
        steps.step, steps.encode(SOURCE), 2, start_id=2, end_id=3, max_length=6, beam_size=3
    )
    assert np.all(ops.convert_to_numpy(wide.scores) >= ops.convert_to_numpy(greedy.scores) - 1e-5)
    top_1 = sample(
        steps.step, steps.encode(SOURCE), 2, start_id=2, end_id=3, max_length=6, top_k=1, seed=7
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(top_1.ids), ops.convert_to_numpy(greedy.ids))
    # Greedy picks the argmax of the teacher-forced model on its own prefix.
    ids = ops.convert_to_numpy(greedy.ids)
    target = np.concatenate([np.full((2, 1), 2, "int32"), ids[:, :-1]], axis=1)
    logits = ops.convert_to_numpy(model({"source_ids": SOURCE, "target_ids": target}))
    logits[..., [0, 2]] = -np.inf  # padding and START are never generated
    lengths = ops.convert_to_numpy(greedy.lengths)
    for row in range(2):
        np.testing.assert_array_equal(
            logits[row, : lengths[row]].argmax(-1), ids[row, : lengths[row]]
        )


def test_train_flag_reaches_the_rnn_builders():
    args = build_parser().parse_args(["train", "--num-layers", "4", "--out", "r"])
    assert getattr(args, "options.num_layers") == 4
    for family in BUILDERS:
        config = TrainConfig(model=family, options={"num_layers": 4})
        config.validate()
        assert config.model_hyperparameters()["num_layers"] == 4
        assert TrainConfig(model=family).model_hyperparameters()["num_layers"] == 1
        with pytest.raises(ConfigError, match="num_layers must be positive"):
            TrainConfig(model=family, options={"num_layers": 0}).validate()


def test_the_readme_command_of_luong_et_al_builds_their_four_layer_shape():
    """The README's `keras-attn train ... --num-layers 4` line parses and validates."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    lines = readme.replace("\\\n", " ").splitlines()
    (command,) = [line for line in lines if "--num-layers 4" in line and "rnn-luong" in line]
    words = shlex.split(command)
    assert words[:2] == ["keras-attn", "train"]
    config = requested_config(build_parser().parse_args(words[1:]))
    config.validate()
    hyperparameters = config.model_hyperparameters()
    assert (config.model, hyperparameters["num_layers"], hyperparameters["units"]) == (
        "rnn-luong",
        4,
        1000,
    )
    assert hyperparameters["embedding_dim"] == 1000 and hyperparameters["dropout"] == 0.2
