import zipfile

import h5py
import keras
import numpy as np
import pytest
from keras import ops

from keras_attn import scores
from keras_attn.layers import Attention, BahdanauDecoder, LocalAttention
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.layers.recurrent import numpy_stack
from tests.lazy_tf import tf

RNG = np.random.default_rng(3)
Y = RNG.normal(size=(2, 4, 3)).astype("float32")
MEMORY = RNG.normal(size=(2, 6, 10)).astype("float32")
MASK = np.array([[True] * 6, [True] * 3 + [False] * 3])


def numpy_bahdanau(decoder, y, memory, mask, h, c):
    """Bahdanau et al.'s decoder with an LSTM f, step by step."""
    score, cell = decoder.score_fn, decoder.rnn_cell
    outputs, alignments = [], []
    for t in range(y.shape[1]):
        scores = ref.additive_score(
            h[:, None, :],
            memory,
            ops.convert_to_numpy(score.query_kernel),
            ops.convert_to_numpy(score.key_kernel),
            ops.convert_to_numpy(score.v),
            ops.convert_to_numpy(score.bias),
        )[:, 0]
        alpha = ref.softmax(scores, mask)  # alpha_t
        context = np.einsum("bk,bkd->bd", alpha, memory)  # c^(t)
        x = np.concatenate([y[:, t], context], axis=-1)
        h, c = ref.lstm_step(
            x,
            h,
            c,
            ops.convert_to_numpy(cell.kernel),
            ops.convert_to_numpy(cell.recurrent_kernel),
            ops.convert_to_numpy(cell.bias),
        )
        outputs.append(np.concatenate([h, context, y[:, t]], axis=-1))
        alignments.append(alpha)
    return np.stack(outputs, 1), np.stack(alignments, 1)


def test_matches_numpy_equations():
    decoder = BahdanauDecoder(8)
    h0 = RNG.normal(size=(2, 8)).astype("float32")
    c0 = RNG.normal(size=(2, 8)).astype("float32")
    outputs, alignments = decoder(
        Y, MEMORY, memory_mask=MASK, initial_state=[h0, c0], return_attention_scores=True
    )
    expected_outputs, expected_alignments = numpy_bahdanau(decoder, Y, MEMORY, MASK, h0, c0)
    np.testing.assert_allclose(
        ops.convert_to_numpy(alignments), expected_alignments, rtol=1e-4, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs), expected_outputs, rtol=1e-4, atol=1e-5
    )
    assert np.all(ops.convert_to_numpy(alignments)[1, :, 3:] == 0.0)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_step_by_step_equals_teacher_forced(cell):
    decoder = BahdanauDecoder(8, cell=cell)
    outputs, alignments = decoder(Y, MEMORY, memory_mask=MASK, return_attention_scores=True)
    states = decoder.get_initial_state(2)
    prepared = decoder.prepare_memory(MEMORY)
    for t in range(Y.shape[1]):
        output_t, alignment_t, states = decoder.step(Y[:, t], states, MEMORY, prepared, MASK)
        np.testing.assert_allclose(
            ops.convert_to_numpy(output_t),
            ops.convert_to_numpy(outputs)[:, t],
            rtol=1e-6,
            atol=1e-6,
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(alignment_t), ops.convert_to_numpy(alignments)[:, t], atol=1e-7
        )


def test_general_and_dot_scores():
    dot = BahdanauDecoder(10, score="dot")
    assert dot(Y, MEMORY).shape == (2, 4, 23)
    with pytest.raises(ValueError, match="same size"):
        BahdanauDecoder(8, score="dot")(Y, MEMORY)
    assert BahdanauDecoder(8, score="general")(Y, MEMORY).shape == (2, 4, 21)


def test_bad_arguments():
    with pytest.raises(ValueError, match="cell='rnn'"):
        BahdanauDecoder(8, cell="rnn")
    with pytest.raises(ValueError, match="units=0"):
        BahdanauDecoder(0)
    with pytest.raises(ValueError, match="1 initial state"):
        BahdanauDecoder(8, cell="gru")(Y, MEMORY, initial_state=[np.zeros((2, 8))] * 2)


def test_padded_targets_give_zero_outputs_and_keras_mask():
    tokens = keras.Input((None,), dtype="int32")
    memory = keras.Input((None, 10))
    embedded = keras.layers.Embedding(20, 3, mask_zero=True)(tokens)
    outputs = BahdanauDecoder(8)(embedded, memory)
    model = keras.Model([tokens, memory], outputs)
    out = ops.convert_to_numpy(model([np.array([[4, 5, 0], [6, 0, 0]]), MEMORY]))
    assert np.all(out[0, 2] == 0.0) and np.all(out[1, 1:] == 0.0)
    assert np.any(out[0, 1] != 0.0)


def test_target_mask_flows_to_the_next_layer_with_and_without_alignments():
    tokens = keras.Input((None,), dtype="int32")
    memory = keras.Input((None, 10))
    embedded = keras.layers.Embedding(20, 3, mask_zero=True)(tokens)
    outputs, _ = BahdanauDecoder(8)(embedded, memory, return_attention_scores=True)
    pooled = keras.layers.GlobalAveragePooling1D()(outputs)
    model = keras.Model([tokens, memory], [outputs, pooled])
    out, mean = model([np.array([[4, 5, 0]]), MEMORY[:1]])
    np.testing.assert_allclose(
        ops.convert_to_numpy(mean)[0], ops.convert_to_numpy(out)[0, :2].mean(0), rtol=1e-5
    )


def test_harness():
    run_layer_test(
        BahdanauDecoder,
        {"units": 8, "cell": "lstm", "score": "additive", "attention_units": 5},
        {"inputs": Y, "memory": MEMORY},
        mask=MASK,
        padded_input="memory",
        mask_kwarg="memory_mask",
        expected_output_shape=(2, 4, 21),
        atol=1e-5,
        rtol=1e-5,
    )


def _decoder_model(decoder):
    y, memory = keras.Input((None, 3)), keras.Input((None, 10))
    mask = keras.Input((None,), dtype="bool")
    outputs = decoder(y, memory, memory_mask=mask, return_attention_scores=True)
    return keras.Model([y, memory, mask], outputs)


def _copy_weights(source, target):
    for ours, theirs in zip(target.weights, source.weights, strict=True):
        ours.assign(theirs)


@pytest.mark.parametrize(
    ("names", "layer"),
    [
        ({"attention_units": 5}, lambda: Attention(score=scores.AdditiveScore(units=5))),
        ({"score": "general"}, lambda: Attention(score="general")),
        (
            {"score": "concat", "distribution": "sparsemax", "attention_units": 4},
            lambda: Attention(score=scores.ConcatScore(units=4), distribution="sparsemax"),
        ),
    ],
)
def test_an_attention_layer_equals_its_names(names, layer):
    by_name, by_layer = BahdanauDecoder(8, **names), BahdanauDecoder(8, attention=layer())
    expected = by_name(Y, MEMORY, memory_mask=MASK, return_attention_scores=True)
    by_layer(Y, MEMORY, memory_mask=MASK)
    _copy_weights(by_name, by_layer)
    got = by_layer(Y, MEMORY, memory_mask=MASK, return_attention_scores=True)
    for ours, theirs in zip(got, expected, strict=True):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(theirs), atol=1e-6
        )
    assert np.all(keras.ops.convert_to_numpy(got[1])[1, :, 3:] == 0.0)


def test_local_p_attention_and_step_by_step_decoding():
    decoder = BahdanauDecoder(8, attention=LocalAttention(mode="predictive", window=2))
    outputs, alignments = decoder(Y, MEMORY, memory_mask=MASK, return_attention_scores=True)
    assert np.all(keras.ops.convert_to_numpy(alignments)[1, :, 3:] == 0.0)
    states = decoder.get_initial_state(2)
    prepared = decoder.prepare_memory(MEMORY)
    for t in range(Y.shape[1]):
        output, alignment, states = decoder.step(Y[:, t], states, MEMORY, prepared, MASK)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(output), keras.ops.convert_to_numpy(outputs)[:, t], atol=1e-5
        )
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(alignment),
            keras.ops.convert_to_numpy(alignments)[:, t],
            atol=1e-6,
        )


def test_a_layer_that_needs_query_positions_is_refused():
    with pytest.raises(ValueError, match="needs no query positions"):
        BahdanauDecoder(8, attention=LocalAttention(mode="monotonic"))
    with pytest.raises(ValueError, match="attention='global'"):
        BahdanauDecoder(8, attention="global")


def test_an_attention_layer_survives_a_keras_round_trip(tmp_path):
    decoder = BahdanauDecoder(8, cell="gru", attention=Attention(score="general", dropout=0.1))
    model = _decoder_model(decoder)
    inputs = [Y, MEMORY, MASK]
    expected = model(inputs)
    assert decoder.get_config()["attention"]["class_name"] == "Attention"
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    clone = loaded.layers[-1]
    assert isinstance(clone.attention, Attention) and clone.attention.score == "general"
    for ours, theirs in zip(loaded(inputs), expected, strict=True):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(theirs)
        )


@pytest.mark.tensorflow_only
def test_a_decoder_by_names_keeps_its_saved_layout(tmp_path):
    # Checkpoints, .keras files and weight names written before attention layers existed load.
    decoder = BahdanauDecoder(8, attention_units=5, name="decoder")
    model = _decoder_model(decoder)
    score = decoder.score_fn.name
    assert [w.path for w in model.weights] == [
        f"decoder/{score}/query_kernel",
        f"decoder/{score}/key_kernel",
        f"decoder/{score}/bias",
        f"decoder/{score}/v",
        "decoder/cell/kernel",
        "decoder/cell/recurrent_kernel",
        "decoder/cell/bias",
    ]
    tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    keys = [name for name, _ in tf.train.list_variables(str(tmp_path / "ckpt"))]
    index = model.layers.index(decoder)
    assert keys == ["_CHECKPOINTABLE_OBJECT_GRAPH"] + [
        f"model/_operations/{index}/{attr}/{var}/.ATTRIBUTES/VARIABLE_VALUE"
        for attr, var in [("rnn_cell", "bias"), ("rnn_cell", "kernel")]
        + [("rnn_cell", "recurrent_kernel"), ("score_fn", "bias"), ("score_fn", "key_kernel")]
        + [("score_fn", "query_kernel"), ("score_fn", "v")]
    ]
    model.save(tmp_path / "model.keras")
    with zipfile.ZipFile(tmp_path / "model.keras") as archive:
        archive.extract("model.weights.h5", tmp_path)
    paths = []
    with h5py.File(tmp_path / "model.weights.h5") as weights:
        weights.visit(lambda name: paths.append(name) if "/vars/" in name else None)
    assert paths == [f"layers/bahdanau_decoder/rnn_cell/vars/{i}" for i in range(3)] + [
        f"layers/bahdanau_decoder/score_fn/vars/{i}" for i in range(4)
    ]


def numpy_stacked_bahdanau(decoder, y, memory, mask, states):
    """Stacked LSTM decoder: attention from the top layer's s^(t-1), c^(t) into the bottom."""
    score = decoder.score_fn
    cells = numpy_stack.decoder_cells(decoder, decoder.rnn_cell)
    top = 2 * (decoder.num_layers - 1)  # h_L in [h_1, c_1, ..., h_L, c_L]
    outputs, alignments = [], []
    for t in range(y.shape[1]):
        scores = ref.additive_score(
            states[top][:, None, :],
            memory,
            ops.convert_to_numpy(score.query_kernel),
            ops.convert_to_numpy(score.key_kernel),
            ops.convert_to_numpy(score.v),
            ops.convert_to_numpy(score.bias),
        )[:, 0]
        alpha = ref.softmax(scores, mask)
        context = np.einsum("bk,bkd->bd", alpha, memory)
        x = np.concatenate([y[:, t], context], axis=-1)
        h, states = numpy_stack.lstm_stack_step(x, states, cells)
        outputs.append(np.concatenate([h, context, y[:, t]], axis=-1))
        alignments.append(alpha)
    return np.stack(outputs, 1), np.stack(alignments, 1)


@pytest.mark.parametrize("num_layers", [2, 4])
def test_stacked_decoder_matches_numpy_equations(num_layers):
    decoder = BahdanauDecoder(8, num_layers=num_layers, layer_dropout=0.5)
    initial = [RNG.normal(size=(2, 8)).astype("float32") for _ in range(2 * num_layers)]
    outputs, alignments = decoder(
        Y, MEMORY, memory_mask=MASK, initial_state=initial, return_attention_scores=True
    )
    expected_outputs, expected_alignments = numpy_stacked_bahdanau(
        decoder, Y, MEMORY, MASK, initial
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(alignments), expected_alignments, rtol=1e-4, atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs), expected_outputs, rtol=1e-4, atol=1e-5
    )
    # The first alignment reads the top layer's initial h, not the bottom one's.
    bottom_query = ref.additive_score(
        initial[0][:, None, :],
        MEMORY,
        ops.convert_to_numpy(decoder.score_fn.query_kernel),
        ops.convert_to_numpy(decoder.score_fn.key_kernel),
        ops.convert_to_numpy(decoder.score_fn.v),
        ops.convert_to_numpy(decoder.score_fn.bias),
    )[:, 0]
    assert (
        np.abs(ref.softmax(bottom_query, MASK) - ops.convert_to_numpy(alignments)[:, 0]).max()
        > 1e-3
    )


@pytest.mark.parametrize("num_layers,cell", [(2, "gru"), (4, "lstm")])
def test_stacked_step_by_step_equals_teacher_forced(num_layers, cell):
    decoder = BahdanauDecoder(8, cell=cell, num_layers=num_layers, layer_dropout=0.2)
    outputs, alignments = decoder(Y, MEMORY, memory_mask=MASK, return_attention_scores=True)
    states = decoder.get_initial_state(2)
    assert len(states) == decoder.num_states == num_layers * (2 if cell == "lstm" else 1)
    prepared = decoder.prepare_memory(MEMORY)
    for t in range(Y.shape[1]):
        output_t, alignment_t, states = decoder.step(Y[:, t], states, MEMORY, prepared, MASK)
        np.testing.assert_allclose(
            ops.convert_to_numpy(output_t),
            ops.convert_to_numpy(outputs)[:, t],
            rtol=1e-6,
            atol=1e-6,
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(alignment_t), ops.convert_to_numpy(alignments)[:, t], atol=1e-7
        )


def test_stacked_weights_are_saved_per_layer(tmp_path):
    decoder = BahdanauDecoder(8, num_layers=3, layer_dropout=0.1)
    model = _decoder_model(decoder)
    paths = [weight.path for weight in decoder.weights]
    assert [p for p in paths if "/cell/" in p or "/rnn_" in p] == [
        f"{decoder.name}/{layer}/{name}"
        for layer in ("cell", "rnn_2/lstm_cell", "rnn_3/lstm_cell")
        for name in ("kernel", "recurrent_kernel", "bias")
    ]
    path = tmp_path / "deep.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    inputs = [Y, MEMORY, MASK]
    for ours, theirs in zip(model(inputs), restored(inputs), strict=True):
        np.testing.assert_allclose(
            ops.convert_to_numpy(ours), ops.convert_to_numpy(theirs), rtol=1e-6, atol=1e-6
        )


@pytest.mark.every_backend
def test_harness_stacked():
    run_layer_test(
        BahdanauDecoder,
        {"units": 8, "cell": "lstm", "num_layers": 2, "layer_dropout": 0.1},
        {"inputs": Y, "memory": MEMORY},
        mask=MASK,
        padded_input="memory",
        mask_kwarg="memory_mask",
        expected_output_shape=(2, 4, 21),
        atol=1e-5,
        rtol=1e-5,
    )
