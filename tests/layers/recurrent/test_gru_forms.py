"""`reset_after` on every recurrent layer that takes `cell="gru"`: both GRU forms against NumPy.

Cho et al. (2014, arXiv:1406.1078, section 2.3), Keras' column order z, r, h:

    r = sigmoid(x W_r + h^(t-1) U_r + b_r)            reset gate
    z = sigmoid(x W_z + h^(t-1) U_z + b_z)            update gate (share of the old state kept)
    h~ = tanh(x W_h + (r ⊙ h^(t-1)) U_h + b_h)        reset_after=False: reset before U_h
    h~ = tanh(x W_h + b_h + r ⊙ (h^(t-1) U_h + b'_h))  reset_after=True: after it (cuDNN's form)
    h^(t) = z ⊙ h^(t-1) + (1 - z) ⊙ h~

With reset_after=True every gate also adds the recurrent bias b' (Keras' bias is (2, 3k)).
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import (
    BahdanauDecoder,
    BidirectionalEncoder,
    BiLanguageModel,
    DeepRNN,
    LuongDecoder,
    PlainDecoder,
)
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(1406)
X = RNG.normal(size=(2, 5, 3)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])
Y = RNG.normal(size=(2, 4, 3)).astype("float32")
CONTEXT = RNG.normal(size=(2, 6)).astype("float32")
H0 = RNG.normal(size=(2, 8)).astype("float32")
TARGET_MASK = np.array([[True] * 4, [True, True, False, False]])
TOL = {"rtol": 1e-5, "atol": 1e-5}  # float32 against float64 NumPy


def randomize(layer):
    """Random values (scale 0.5) in every weight of `layer`, biases included."""
    layer.set_weights(
        [RNG.normal(scale=0.5, size=w.shape).astype("float32") for w in layer.weights]
    )


def numpy_gru_step(x, h, kernel, recurrent_kernel, bias, reset_after):
    """One GRU step, gate by gate, in Keras' column order z, r, h (see the module docstring)."""
    w_z, w_r, w_h = np.split(kernel.astype(np.float64), 3, axis=1)
    u_z, u_r, u_h = np.split(recurrent_kernel.astype(np.float64), 3, axis=1)
    if reset_after:
        b_z, b_r, b_h = np.split(bias[0].astype(np.float64), 3)
        rb_z, rb_r, rb_h = np.split(bias[1].astype(np.float64), 3)
    else:
        b_z, b_r, b_h = np.split(bias.astype(np.float64), 3)
        rb_z = rb_r = rb_h = 0.0
    r = ref.sigmoid(x @ w_r + b_r + h @ u_r + rb_r)
    z = ref.sigmoid(x @ w_z + b_z + h @ u_z + rb_z)
    if reset_after:
        candidate = np.tanh(x @ w_h + b_h + r * (h @ u_h + rb_h))
    else:
        candidate = np.tanh(x @ w_h + (r * h) @ u_h + b_h)
    return z * h + (1.0 - z) * candidate


def numpy_gru_sequence(x, mask, cell, reset_after, h=None, reverse=False):
    """The GRU over `(batch, T, d)`; padded steps keep the state. `(outputs, final h)`."""
    weights = (
        ops.convert_to_numpy(cell.kernel),
        ops.convert_to_numpy(cell.recurrent_kernel),
        ops.convert_to_numpy(cell.bias),
    )
    h = np.zeros((x.shape[0], cell.units)) if h is None else h.astype(np.float64)
    outputs = np.zeros((x.shape[0], x.shape[1], cell.units))
    for t in range(x.shape[1] - 1, -1, -1) if reverse else range(x.shape[1]):
        keep = mask[:, t : t + 1]
        h = np.where(keep, numpy_gru_step(x[:, t], h, *weights, reset_after), h)
        outputs[:, t] = h
    return outputs, h


def valid(sequence):
    return np.where(MASK[:, :, None], sequence, 0.0)


@pytest.mark.parametrize("reset_after", [False, True])
def test_bidirectional_encoder_matches_numpy_gru_of_its_form(reset_after):
    encoder = BidirectionalEncoder(4, cell="gru", reset_after=reset_after)
    encoder(X)
    randomize(encoder)
    sequence, h = encoder(X, mask=MASK)
    forward, backward = encoder.rnn.forward_layer.cell, encoder.rnn.backward_layer.cell
    assert forward.reset_after is reset_after and backward.reset_after is reset_after
    f_out, f_h = numpy_gru_sequence(X, MASK, forward, reset_after)
    b_out, b_h = numpy_gru_sequence(X, MASK, backward, reset_after, reverse=True)
    np.testing.assert_allclose(
        valid(ops.convert_to_numpy(sequence)), valid(np.concatenate([f_out, b_out], -1)), **TOL
    )
    np.testing.assert_allclose(ops.convert_to_numpy(h), np.concatenate([f_h, b_h], -1), **TOL)


@pytest.mark.parametrize("reset_after", [False, True])
def test_plain_decoder_matches_numpy_gru_of_its_form(reset_after):
    """Cho et al.'s decoder, eq. 7 with context feeding: s^(t) = GRU(s^(t-1), [y^(t-1); c])."""
    decoder = PlainDecoder(8, cell="gru", reset_after=reset_after)
    decoder(Y, CONTEXT)
    randomize(decoder)
    outputs = ops.convert_to_numpy(decoder(Y, CONTEXT, initial_state=[H0]))
    fed = np.concatenate([Y, np.repeat(CONTEXT[:, None], Y.shape[1], 1)], -1)
    states, _ = numpy_gru_sequence(
        fed, np.ones(Y.shape[:2], bool), decoder.rnn.cell, reset_after, H0
    )
    expected = np.concatenate([states, np.repeat(CONTEXT[:, None], 4, 1), Y], -1)
    np.testing.assert_allclose(outputs, expected, **TOL)
    states_t = [H0]
    for t in range(Y.shape[1]):  # inference's step: the same form
        output_t, states_t = decoder.step(Y[:, t], states_t, CONTEXT)
        np.testing.assert_allclose(ops.convert_to_numpy(output_t), expected[:, t], **TOL)


@pytest.mark.parametrize("reset_after", [False, True])
def test_deep_rnn_layers_match_numpy_gru_of_their_form(reset_after):
    rnn = DeepRNN(4, num_layers=2, cell="gru", reset_after=reset_after)
    rnn(X)
    randomize(rnn)
    sequence, h_1, h_2 = rnn(X, mask=MASK)
    first, second = (layer.cell for layer in rnn.rnn_layers)
    out_1, expected_h_1 = numpy_gru_sequence(X, MASK, first, reset_after)
    out_2, expected_h_2 = numpy_gru_sequence(out_1, MASK, second, reset_after)
    np.testing.assert_allclose(valid(ops.convert_to_numpy(sequence)), valid(out_2), **TOL)
    np.testing.assert_allclose(ops.convert_to_numpy(h_1), expected_h_1, **TOL)
    np.testing.assert_allclose(ops.convert_to_numpy(h_2), expected_h_2, **TOL)


def test_the_two_forms_compute_different_functions_with_the_same_weights():
    """Same kernels, zero biases: only where r is applied differs, and the outputs do."""
    paper, cudnn = (
        PlainDecoder(8, cell="gru", reset_after=form, context_feeding=False)
        for form in (False, True)
    )
    paper(Y, CONTEXT)
    cudnn(Y, CONTEXT)
    randomize(paper)
    kernel, recurrent_kernel, _ = paper.get_weights()
    paper.set_weights([kernel, recurrent_kernel, np.zeros(24, "float32")])
    cudnn.set_weights([kernel, recurrent_kernel, np.zeros((2, 24), "float32")])
    difference = np.abs(
        ops.convert_to_numpy(paper(Y, CONTEXT, initial_state=[H0]))
        - ops.convert_to_numpy(cudnn(Y, CONTEXT, initial_state=[H0]))
    )
    assert float(np.max(difference)) > 1e-2


@pytest.mark.parametrize("input_feeding", [False, True])
@pytest.mark.parametrize("reset_after", [False, True])
def test_attention_decoders_and_bilm_build_gru_cells_of_the_form(reset_after, input_feeding):
    memory = RNG.normal(size=(2, 5, 6)).astype("float32")
    bahdanau = BahdanauDecoder(8, cell="gru", reset_after=reset_after)
    luong = LuongDecoder(8, cell="gru", input_feeding=input_feeding, reset_after=reset_after)
    bilm = BiLanguageModel(20, 4, num_layers=1, cell="gru", reset_after=reset_after)
    bahdanau(Y, memory)
    luong(Y, memory)
    bilm(np.array([[3, 4, 5, 0]]))
    cells = [bahdanau.rnn_cell, luong.rnn.cell]
    cells += [layer.cell for layer in bilm.forward_layers + bilm.backward_layers]
    assert [cell.reset_after for cell in cells] == [reset_after] * 4
    bias_shape = (2, 24) if reset_after else (24,)
    assert tuple(bahdanau.rnn_cell.bias.shape) == bias_shape
    assert tuple(luong.rnn.cell.bias.shape) == bias_shape


def test_luong_decoder_state_follows_numpy_gru_without_input_feeding():
    """Without input feeding h_1..h_T are a GRU over y alone: h~ = tanh(W_c [c_t; h_t])."""
    memory = RNG.normal(size=(2, 5, 6)).astype("float32")
    decoder = LuongDecoder(8, cell="gru", input_feeding=False, reset_after=False)
    decoder(Y, memory)
    randomize(decoder)
    outputs = ops.convert_to_numpy(decoder(Y, memory, initial_state=[H0]))
    states, _ = numpy_gru_sequence(Y, np.ones(Y.shape[:2], bool), decoder.rnn.cell, False, H0)
    _, weights = decoder(Y, memory, initial_state=[H0], return_attention_scores=True)
    context = np.einsum("bts,bsd->btd", ops.convert_to_numpy(weights), memory)
    kernel, *bias = decoder.attentional_state.get_weights()
    pre = np.concatenate([context, states], -1) @ kernel + (bias[0] if bias else 0.0)
    np.testing.assert_allclose(outputs, np.tanh(pre), **TOL)


def test_config_round_trip_and_configs_without_the_key_load_the_cudnn_form():
    for layer in (
        PlainDecoder(8, cell="gru", reset_after=False),
        BahdanauDecoder(8, cell="gru", reset_after=False),
        LuongDecoder(8, cell="gru", reset_after=False),
        BidirectionalEncoder(4, cell="gru", reset_after=False),
        DeepRNN(4, cell="gru", reset_after=False),
        BiLanguageModel(20, 4, cell="gru", reset_after=False),
    ):
        config = layer.get_config()
        assert config["reset_after"] is False
        assert type(layer).from_config(config).reset_after is False
        del config["reset_after"]  # a config saved before the option existed
        assert type(layer).from_config(config).reset_after is True


def test_keras_save_keeps_the_form(tmp_path):
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(20, 3, mask_zero=True)(tokens)
    sequence, _ = BidirectionalEncoder(4, cell="gru", reset_after=False)(embedded)
    model = keras.Model(tokens, sequence)
    ids = np.array([[4, 5, 6, 0], [7, 8, 0, 0]])
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.layers[-1].rnn.forward_layer.cell.reset_after is False
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded(ids)), ops.convert_to_numpy(model(ids)), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: PlainDecoder(8, **kw),
        lambda **kw: BahdanauDecoder(8, **kw),
        lambda **kw: LuongDecoder(8, **kw),
        lambda **kw: BidirectionalEncoder(4, **kw),
        lambda **kw: DeepRNN(4, **kw),
        lambda **kw: BiLanguageModel(20, 4, **kw),
    ],
)
def test_reset_after_false_needs_a_gru(make):
    with pytest.raises(ValueError, match="cell='lstm', reset_after=False"):
        make(cell="lstm", reset_after=False)
    with pytest.raises(ValueError, match="reset_after='no'"):
        make(cell="gru", reset_after="no")
    assert make(cell="lstm").reset_after is True  # the default applies to an LSTM too


def test_deep_rnn_template_cell_sets_its_own_form():
    with pytest.raises(ValueError, match="needs cell='gru'"):
        DeepRNN(4, cell=keras.layers.GRU(4, reset_after=False), reset_after=False)


def test_cudnn_forced_on_needs_the_reset_after_form():
    for make in (BidirectionalEncoder, DeepRNN):
        with pytest.raises(ValueError, match="use_cudnn=True, reset_after=False"):
            make(4, cell="gru", use_cudnn=True, reset_after=False)
    with pytest.raises(ValueError, match="use_cudnn=True, reset_after=False"):
        BiLanguageModel(20, 4, cell="gru", use_cudnn=True, reset_after=False)


@pytest.mark.every_backend
def test_harness_plain_decoder_paper_form():
    run_layer_test(
        PlainDecoder,
        {"units": 8, "cell": "gru", "context_feeding": True, "reset_after": False},
        {"inputs": Y, "context": CONTEXT},
        call_kwargs={"initial_state": [H0]},
        mask=TARGET_MASK,
        padded_input="inputs",
        mask_kwarg="inputs_mask",
        weights_kwarg=None,
        expected_output_shape=(2, 4, 8 + 6 + 3),
        atol=1e-5,
        rtol=1e-5,
    )


def test_harness_bidirectional_encoder_paper_form():
    run_layer_test(
        BidirectionalEncoder,
        {"units": 4, "cell": "gru", "use_cudnn": "auto", "reset_after": False},
        {"inputs": X},
        mask=MASK,
        padded_input="inputs",
        mask_kwarg="mask",
        weights_kwarg=None,
        expected_output_shape=((2, 5, 8), (2, 8)),
        atol=1e-5,
        rtol=1e-5,
    )
