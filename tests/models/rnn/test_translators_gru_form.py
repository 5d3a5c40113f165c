"""The RNN translator builders' `reset_after`: the GRU form of encoder and decoder alike.

`rnn_plain_translator` is checked end to end against a NumPy forward pass of its equations
(embeddings, bidirectional GRU encoder, tanh bridge, Cho et al.'s decoder with the context fed
at every step, output projection), for each form, with every weight random.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.models import (
    rnn_attention_translator,
    rnn_luong_translator,
    rnn_plain_translator,
)
from tests import numpy_reference as ref

RNG = np.random.default_rng(78)
SOURCE = np.array([[5, 6, 7, 8, 9], [4, 3, 2, 0, 0]], "int32")
TARGET = np.array([[1, 10, 11, 12], [1, 13, 0, 0]], "int32")
BUILDERS = (rnn_plain_translator, rnn_attention_translator, rnn_luong_translator)


def randomize(model):
    model.set_weights(
        [RNG.normal(scale=0.5, size=w.shape).astype("float32") for w in model.weights]
    )


def numpy_gru_step(x, h, kernel, recurrent_kernel, bias, reset_after):
    """One GRU step (Keras' column order z, r, h); the reset gate before or after `U_h`."""
    w_z, w_r, w_h = np.split(kernel.astype(np.float64), 3, axis=1)
    u_z, u_r, u_h = np.split(recurrent_kernel.astype(np.float64), 3, axis=1)
    if reset_after:
        (b_z, b_r, b_h), (rb_z, rb_r, rb_h) = (np.split(b.astype(np.float64), 3) for b in bias)
    else:
        (b_z, b_r, b_h), rb_z, rb_r, rb_h = np.split(bias.astype(np.float64), 3), 0.0, 0.0, 0.0
    r = ref.sigmoid(x @ w_r + b_r + h @ u_r + rb_r)  # reset gate
    z = ref.sigmoid(x @ w_z + b_z + h @ u_z + rb_z)  # update gate
    if reset_after:  # Keras' and cuDNN's form
        candidate = np.tanh(x @ w_h + b_h + r * (h @ u_h + rb_h))
    else:  # Cho et al., 2014, section 2.3
        candidate = np.tanh(x @ w_h + (r * h) @ u_h + b_h)
    return z * h + (1.0 - z) * candidate


def cell_weights(cell):
    return (
        ops.convert_to_numpy(cell.kernel),
        ops.convert_to_numpy(cell.recurrent_kernel),
        ops.convert_to_numpy(cell.bias),
    )


def numpy_plain_translator(model, reset_after):
    """Logits `(batch, T_y, V)` of `rnn_plain_translator` (dropout off) from its weights."""
    source = ops.convert_to_numpy(model.get_layer("source_embedding").embeddings)[SOURCE]
    encoder = model.get_layer("encoder").rnn
    forward = cell_weights(encoder.forward_layer.cell)
    backward = cell_weights(encoder.backward_layer.cell)
    units = encoder.forward_layer.cell.units
    h_fwd = np.zeros((len(SOURCE), units))
    h_bwd = np.zeros((len(SOURCE), units))
    real = SOURCE != 0
    for t in range(SOURCE.shape[1]):  # padded steps keep the state
        keep = real[:, t : t + 1]
        h_fwd = np.where(keep, numpy_gru_step(source[:, t], h_fwd, *forward, reset_after), h_fwd)
    for t in reversed(range(SOURCE.shape[1])):
        keep = real[:, t : t + 1]
        h_bwd = np.where(keep, numpy_gru_step(source[:, t], h_bwd, *backward, reset_after), h_bwd)
    context = np.concatenate([h_fwd, h_bwd], -1)  # c = [h_fwd^(T); h_bwd^(1)]
    bridge_kernel, bridge_bias = model.get_layer("bridge_0").get_weights()
    s = np.tanh(context @ bridge_kernel + bridge_bias)  # s^(0)
    target = ops.convert_to_numpy(model.get_layer("target_embedding").embeddings)[TARGET]
    decoder = cell_weights(model.get_layer("decoder").rnn.cell)
    outputs = []
    for t in range(TARGET.shape[1]):
        s = numpy_gru_step(np.concatenate([target[:, t], context], -1), s, *decoder, reset_after)
        outputs.append(np.concatenate([s, context, target[:, t]], -1))  # o^(t) = [s; c; y]
    kernel, bias = model.get_layer("output_projection").get_weights()
    return np.stack(outputs, 1) @ kernel + bias


@pytest.mark.parametrize("reset_after", [False, True])
def test_plain_translator_matches_numpy_equations_of_its_form(reset_after):
    model = rnn_plain_translator(
        20, 16, embedding_dim=4, units=8, cell="gru", reset_after=reset_after
    )
    randomize(model)
    logits = ops.convert_to_numpy(model({"source_ids": SOURCE, "target_ids": TARGET}))
    expected = numpy_plain_translator(model, reset_after)
    real = (TARGET != 0)[:, :, None]
    np.testing.assert_allclose(
        np.where(real, logits, 0.0), np.where(real, expected, 0.0), rtol=1e-4, atol=1e-4
    )


def gru_cells(model):
    """Every GRU cell of a translator, the encoder's two directions and the decoder's."""
    encoder = model.get_layer("encoder").rnn
    decoder = model.get_layer("decoder")
    decoder_cell = decoder.rnn_cell if hasattr(decoder, "rnn_cell") else decoder.rnn.cell
    return [encoder.forward_layer.cell, encoder.backward_layer.cell, decoder_cell]


@pytest.mark.parametrize("builder", BUILDERS)
def test_every_builder_passes_the_form_to_encoder_and_decoder(builder, tmp_path):
    model = builder(20, 16, embedding_dim=4, units=8, cell="gru", reset_after=False)
    assert [cell.reset_after for cell in gru_cells(model)] == [False] * 3
    assert [tuple(cell.bias.shape) for cell in gru_cells(model)] == [(12,), (12,), (24,)]
    default = builder(20, 16, embedding_dim=4, units=8, cell="gru")
    assert [cell.reset_after for cell in gru_cells(default)] == [True] * 3
    randomize(model)
    inputs = {"source_ids": SOURCE, "target_ids": TARGET}
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert [cell.reset_after for cell in gru_cells(loaded)] == [False] * 3
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded(inputs)),
        ops.convert_to_numpy(model(inputs)),
        rtol=1e-6,
        atol=1e-6,
    )


@pytest.mark.parametrize("builder", BUILDERS)
def test_the_paper_form_needs_a_gru(builder):
    with pytest.raises(ValueError, match="cell='lstm', reset_after=False"):
        builder(20, 16, embedding_dim=4, units=8, cell="lstm", reset_after=False)
