import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.decoding import beam_search, greedy_search
from keras_attn.layers import LocalAttention, LuongDecoder
from keras_attn.models import LuongTranslatorSteps, rnn_luong_translator

SOURCE = np.array([[5, 6, 7, 8, 0], [9, 4, 0, 0, 0]], "int32")
TARGET = np.array([[2, 11, 12, 13], [2, 14, 15, 0]], "int32")


def tiny(**kwargs):
    keras.utils.set_random_seed(0)
    return rnn_luong_translator(20, 30, embedding_dim=6, units=8, dropout=0.0, **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attention": "local-m", "window": 1},
        {"cell": "gru", "score": "concat", "input_feeding": False},
        {"attention": "local-p", "window": 2, "distribution": "sparsemax"},
    ],
    ids=["local-m-feeding", "gru-concat-fast-path", "local-p-sparsemax"],
)
def test_steps_reproduce_the_teacher_forced_logits(kwargs):
    model = tiny(**kwargs)
    decoder = model.get_layer("decoder")
    assert isinstance(decoder, LuongDecoder)
    logits = ops.convert_to_numpy(model({"source_ids": SOURCE, "target_ids": TARGET}))
    _, alignments = decoder(
        model.get_layer("target_embedding")(TARGET),
        *_memory_and_state(model),
        return_attention_scores=True,
    )
    steps = LuongTranslatorSteps(model)
    state = steps.encode(SOURCE)
    for t in range(TARGET.shape[1]):
        logits_t, state = steps.step(TARGET[:, t], state)
        real = TARGET[:, t] != 0
        np.testing.assert_allclose(
            ops.convert_to_numpy(logits_t)[real], logits[real, t], rtol=1e-5, atol=1e-5
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(state["attention"])[real],
            ops.convert_to_numpy(alignments)[real, t],
            atol=1e-6,
        )
    assert np.all(ops.convert_to_numpy(state["attention"])[1, 2:] == 0.0)  # padded source positions


def _memory_and_state(model):
    """The decoder's teacher-forced inputs besides the target: memory, mask, initial state."""
    embedded = model.get_layer("source_embedding")(SOURCE)
    mask = SOURCE != 0
    memory, *final = model.get_layer("encoder")(embedded, mask=mask)
    initial = [model.get_layer(f"bridge_{i}")(s) for i, s in enumerate(final)]
    return memory, mask, initial


def test_keras_round_trip_keeps_the_decoder_and_its_outputs(tmp_path):
    model = tiny(attention="local-p", window=3, score="dot", input_feeding=False)
    path = tmp_path / "luong.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    decoder = loaded.get_layer("decoder")
    assert (decoder.attention, decoder.window, decoder.score, decoder.input_feeding) == (
        "local-p",
        3,
        "dot",
        False,
    )
    inputs = {"source_ids": SOURCE, "target_ids": TARGET}
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded(inputs)), ops.convert_to_numpy(model(inputs)), atol=1e-6
    )


def test_greedy_and_beam_search_drive_the_steps():
    steps = LuongTranslatorSteps(tiny(attention="local-m", window=2))
    greedy = greedy_search(steps.step, steps.encode(SOURCE), 2, start_id=2, end_id=3, max_length=6)
    beam = beam_search(
        steps.step, steps.encode(SOURCE), 2, start_id=2, end_id=3, max_length=6, beam_size=1
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(beam.ids), ops.convert_to_numpy(greedy.ids))
    np.testing.assert_allclose(
        ops.convert_to_numpy(beam.scores), ops.convert_to_numpy(greedy.scores), rtol=1e-5
    )
    assert greedy.alignments.shape == (2, 6, 5)


def test_an_attention_layer_builds_the_same_translator_and_reloads(tmp_path):
    named = tiny(attention="local-m", window=2)
    model = tiny(attention=LocalAttention(mode="monotonic", window=2, score="general"))
    model.set_weights(named.get_weights())
    inputs = {"source_ids": SOURCE, "target_ids": TARGET}
    logits = ops.convert_to_numpy(model(inputs))
    np.testing.assert_array_equal(logits, ops.convert_to_numpy(named(inputs)))
    path = tmp_path / "luong_layer.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert isinstance(reloaded.get_layer("decoder").attention_layer, LocalAttention)
    np.testing.assert_array_equal(ops.convert_to_numpy(reloaded(inputs)), logits)
