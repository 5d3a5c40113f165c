"""Keras' LSTM and GRU compute the standard LSTM and GRU equations, so the library reuses them.

Weights layout (see docs/recurrent.md): LSTM `kernel` (d, 4k) and `recurrent_kernel` (k, 4k) hold
the gates' columns in the order i, f, c (candidate), o; `bias` (4k,). GRU `kernel` (d, 3k) and
`recurrent_kernel` (k, 3k) in the order z, r, h (candidate). Keras' z is Cho et al.'s update
gate Z: the share of the OLD state kept, h^(t) = Z ⊙ h^(t-1) + (1 - Z) ⊙ h̃^(t).
"""

import keras
import numpy as np
import pytest
from keras import ops

from tests import numpy_reference as ref

RNG = np.random.default_rng(2024)
BATCH, STEPS, D, K = 3, 6, 5, 4
X = RNG.normal(size=(BATCH, STEPS, D)).astype("float32")
MASK = np.array([[True] * STEPS, [True] * 4 + [False] * 2, [True] * 2 + [False] * 4])
TOL = {"rtol": 1e-5, "atol": 1e-5}  # float32 against float64 NumPy


def random_weights(layer):
    """Random (not constant) values in every weight, biases included."""
    weights = [RNG.normal(scale=0.5, size=w.shape).astype("float32") for w in layer.get_weights()]
    layer.set_weights(weights)
    return weights


def numpy_lstm(x, mask, kernel, recurrent_kernel, bias):
    """The LSTM (Hochreiter and Schmidhuber, 1997; forget gate of Gers et al., 2000), gates
    written out one by one in Keras' column order i, f, c, o."""
    w_xi, w_xf, w_xc, w_xo = np.split(kernel.astype(np.float64), 4, axis=1)
    w_hi, w_hf, w_hc, w_ho = np.split(recurrent_kernel.astype(np.float64), 4, axis=1)
    b_i, b_f, b_c, b_o = np.split(bias.astype(np.float64), 4)
    h = np.zeros((x.shape[0], K))
    c = np.zeros((x.shape[0], K))
    outputs = []
    for t in range(x.shape[1]):
        x_t = x[:, t].astype(np.float64)
        i = ref.sigmoid(x_t @ w_xi + h @ w_hi + b_i)  # input gate I
        f = ref.sigmoid(x_t @ w_xf + h @ w_hf + b_f)  # forget gate F
        o = ref.sigmoid(x_t @ w_xo + h @ w_ho + b_o)  # output gate O
        # candidate: tanh(x W_xc + h^(t-1) W_hc + b_c)
        candidate = np.tanh(x_t @ w_xc + h @ w_hc + b_c)
        c_new = f * c + i * candidate  # cell state
        h_new = o * np.tanh(c_new)  # hidden state
        keep = mask[:, t : t + 1]
        h, c = np.where(keep, h_new, h), np.where(keep, c_new, c)
        outputs.append(h)
    return np.stack(outputs, 1), h, c


def numpy_gru(x, mask, kernel, recurrent_kernel, bias, reset_after):
    """The GRU (Cho et al., 2014, arXiv:1406.1078) in Keras' column order z, r, h.

    reset_after=False is the paper's form: h̃ = tanh(x W_xh + (R ⊙ h^(t-1)) W_hh + b_h).
    reset_after=True (Keras' default, cuDNN's form) resets after the product and has a second
    bias: h̃ = tanh(x W_xh + b_xh + R ⊙ (h^(t-1) W_hh + b_hh)).
    """
    w_xz, w_xr, w_xh = np.split(kernel.astype(np.float64), 3, axis=1)
    w_hz, w_hr, w_hh = np.split(recurrent_kernel.astype(np.float64), 3, axis=1)
    if reset_after:
        input_bias, recurrent_bias = bias.astype(np.float64)
    else:
        input_bias, recurrent_bias = bias.astype(np.float64), np.zeros(3 * K)
    b_z, b_r, b_h = np.split(input_bias, 3)
    rb_z, rb_r, rb_h = np.split(recurrent_bias, 3)
    h = np.zeros((x.shape[0], K))
    outputs = []
    for t in range(x.shape[1]):
        x_t = x[:, t].astype(np.float64)
        r = ref.sigmoid(x_t @ w_xr + b_r + h @ w_hr + rb_r)  # reset gate R
        z = ref.sigmoid(x_t @ w_xz + b_z + h @ w_hz + rb_z)  # update gate Z
        if reset_after:
            candidate = np.tanh(x_t @ w_xh + b_h + r * (h @ w_hh + rb_h))
        else:
            candidate = np.tanh(x_t @ w_xh + (r * h) @ w_hh + b_h)  # candidate
        # (1 - Z) multiplies the candidate h̃^(t)
        h_new = z * h + (1.0 - z) * candidate
        keep = mask[:, t : t + 1]
        h = np.where(keep, h_new, h)
        outputs.append(h)
    return np.stack(outputs, 1), h


def valid(sequence):
    return np.where(MASK[:, :, None], sequence, 0.0)


def test_keras_lstm_is_eqs_2_8_to_2_10():
    lstm = keras.layers.LSTM(K, return_sequences=True, return_state=True, use_cudnn=False)
    lstm(X)
    kernel, recurrent_kernel, bias = random_weights(lstm)
    sequence, h, c = lstm(X, mask=MASK)
    expected_sequence, expected_h, expected_c = numpy_lstm(X, MASK, kernel, recurrent_kernel, bias)
    np.testing.assert_allclose(
        valid(ops.convert_to_numpy(sequence)), valid(expected_sequence), **TOL
    )
    np.testing.assert_allclose(ops.convert_to_numpy(h), expected_h, **TOL)
    np.testing.assert_allclose(ops.convert_to_numpy(c), expected_c, **TOL)


def test_lstm_column_order_is_i_f_c_o():
    """Swapping the forget and input blocks (the wrong layout) breaks the match."""
    lstm = keras.layers.LSTM(K, use_cudnn=False)
    lstm(X)
    kernel, recurrent_kernel, bias = random_weights(lstm)

    def swap(w):
        i, f, c, o = np.split(w, 4, axis=-1)
        return np.concatenate([f, i, c, o], axis=-1)

    _, expected_h, _ = numpy_lstm(X, MASK, kernel, recurrent_kernel, bias)
    _, wrong_h, _ = numpy_lstm(X, MASK, swap(kernel), swap(recurrent_kernel), swap(bias))
    got = ops.convert_to_numpy(lstm(X, mask=MASK))
    np.testing.assert_allclose(got, expected_h, **TOL)
    assert np.abs(got - wrong_h).max() > 1e-2


@pytest.mark.parametrize("reset_after", [False, True])
def test_keras_gru_matches_its_form(reset_after):
    gru = keras.layers.GRU(
        K, return_sequences=True, return_state=True, reset_after=reset_after, use_cudnn=False
    )
    gru(X)
    kernel, recurrent_kernel, bias = random_weights(gru)
    assert bias.shape == ((2, 3 * K) if reset_after else (3 * K,))
    sequence, h = gru(X, mask=MASK)
    expected_sequence, expected_h = numpy_gru(
        X, MASK, kernel, recurrent_kernel, bias, reset_after=reset_after
    )
    np.testing.assert_allclose(
        valid(ops.convert_to_numpy(sequence)), valid(expected_sequence), **TOL
    )
    np.testing.assert_allclose(ops.convert_to_numpy(h), expected_h, **TOL)


def test_gru_reset_after_true_is_not_the_paper_form():
    """Same kernels, zero biases (so the extra bias plays no part): the two forms still differ."""
    paper_form = keras.layers.GRU(K, return_sequences=True, reset_after=False, use_cudnn=False)
    cudnn_form = keras.layers.GRU(K, return_sequences=True, reset_after=True, use_cudnn=False)
    paper_form(X)
    cudnn_form(X)
    kernel, recurrent_kernel, _ = random_weights(paper_form)
    paper_form.set_weights([kernel, recurrent_kernel, np.zeros(3 * K, "float32")])
    cudnn_form.set_weights([kernel, recurrent_kernel, np.zeros((2, 3 * K), "float32")])
    ours = ops.convert_to_numpy(paper_form(X))
    theirs = ops.convert_to_numpy(cudnn_form(X))
    expected, _ = numpy_gru(X, np.ones_like(MASK), kernel, recurrent_kernel, np.zeros(3 * K), False)
    np.testing.assert_allclose(ours, expected, **TOL)
    assert np.abs(ours - theirs).max() > 1e-2


def test_gru_z_keeps_the_old_state():
    """Keras' z multiplies h^(t-1): with z saturated at 1 the state never moves."""
    gru = keras.layers.GRU(K, reset_after=False, use_cudnn=False)
    gru(X)
    kernel, recurrent_kernel, bias = random_weights(gru)
    bias = bias.copy()
    bias[:K] = 50.0  # z = sigmoid(... + 50) = 1 to float32 precision
    gru.set_weights([kernel, recurrent_kernel, bias])
    h0 = RNG.normal(size=(BATCH, K)).astype("float32")
    np.testing.assert_allclose(
        ops.convert_to_numpy(gru(X, initial_state=[h0])), h0, rtol=1e-6, atol=1e-6
    )
