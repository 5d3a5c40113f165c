import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.decoding import beam_search, greedy_search
from keras_attn.layers import PlainDecoder
from keras_attn.models import PlainTranslatorSteps, rnn_plain_translator
from keras_attn.models.families import get_family

SOURCE = np.array([[5, 6, 7, 8, 0], [9, 4, 0, 0, 0]], "int32")
TARGET = np.array([[2, 11, 12, 13], [2, 14, 15, 0]], "int32")


def tiny(**kwargs):
    keras.utils.set_random_seed(0)
    return rnn_plain_translator(20, 30, embedding_dim=6, units=8, dropout=0.0, **kwargs)


@pytest.mark.parametrize(
    "kwargs", [{}, {"cell": "gru", "context_feeding": False}], ids=["lstm-cho", "gru-sutskever"]
)
def test_steps_reproduce_the_teacher_forced_logits(kwargs):
    model = tiny(**kwargs)
    assert isinstance(model.get_layer("decoder"), PlainDecoder)
    logits = ops.convert_to_numpy(model({"source_ids": SOURCE, "target_ids": TARGET}))
    steps = PlainTranslatorSteps(model)
    state = steps.encode(SOURCE)
    for t in range(TARGET.shape[1]):
        logits_t, state = steps.step(TARGET[:, t], state)
        real = TARGET[:, t] != 0
        np.testing.assert_allclose(
            ops.convert_to_numpy(logits_t)[real], logits[real, t], rtol=1e-5, atol=1e-5
        )
        np.testing.assert_array_equal(
            ops.convert_to_numpy(state["attention"]), np.zeros((2, 5), "float32")
        )


def test_the_context_is_the_encoders_final_state_and_padding_does_not_matter():
    model = tiny()
    embedded = model.get_layer("source_embedding")(SOURCE)
    _, h, _ = model.get_layer("encoder")(embedded, mask=SOURCE != 0)
    state = PlainTranslatorSteps(model).encode(SOURCE)
    np.testing.assert_allclose(
        ops.convert_to_numpy(state["context"]), ops.convert_to_numpy(h), atol=1e-6
    )
    noisy = np.where(SOURCE == 0, 17, SOURCE)  # other ids behind the padding...
    wider = np.pad(SOURCE, ((0, 0), (0, 2)))  # ...and more padding: same logits
    inputs = {"source_ids": SOURCE, "target_ids": TARGET}
    expected = ops.convert_to_numpy(model(inputs))
    got = ops.convert_to_numpy(model({"source_ids": wider, "target_ids": TARGET}))
    np.testing.assert_allclose(got, expected, atol=1e-5)
    changed = ops.convert_to_numpy(model({"source_ids": noisy, "target_ids": TARGET}))
    assert np.abs(changed[1] - expected[1]).max() > 1e-4  # 17 is a real token there: c moves


def test_keras_round_trip_keeps_the_decoder_and_its_outputs(tmp_path):
    model = tiny(cell="gru", context_feeding=False)
    path = tmp_path / "plain.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    decoder = loaded.get_layer("decoder")
    assert (decoder.cell, decoder.context_feeding) == ("gru", False)
    inputs = {"source_ids": SOURCE, "target_ids": TARGET}
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded(inputs)), ops.convert_to_numpy(model(inputs)), atol=1e-6
    )


def test_greedy_and_beam_search_drive_the_steps_with_zero_alignments():
    steps = get_family("rnn-plain").decoding_steps(tiny(), 6)
    assert isinstance(steps, PlainTranslatorSteps)
    greedy = greedy_search(steps.step, steps.encode(SOURCE), 2, start_id=2, end_id=3, max_length=6)
    beam = beam_search(
        steps.step, steps.encode(SOURCE), 2, start_id=2, end_id=3, max_length=6, beam_size=1
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(beam.ids), ops.convert_to_numpy(greedy.ids))
    np.testing.assert_allclose(
        ops.convert_to_numpy(beam.scores), ops.convert_to_numpy(greedy.scores), rtol=1e-5
    )
    np.testing.assert_array_equal(
        ops.convert_to_numpy(greedy.alignments), np.zeros((2, 6, 5), "float32")
    )


def test_family_options():
    family = get_family("rnn-plain")
    assert family.builder_defaults() == {
        "embedding_dim": 128, "units": 256, "cell": "lstm", "gru_reset_after": True,
        "dropout": 0.1, "num_layers": 1, "encoder_direction": "bi", "reverse_source": False,
        "context_feeding": True,
    }  # fmt: skip
    with pytest.raises(ValueError, match="even number of units"):
        family.build(20, 30, units=7)
