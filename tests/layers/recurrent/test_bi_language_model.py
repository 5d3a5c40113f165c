import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import BiLanguageModel
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref
from tests.lazy_tf import tf

VOCAB = 13
IDS = np.array([[3, 5, 7, 2, 9, 4], [6, 1, 8, 11, 0, 0]], "int32")
MASK = IDS != 0
TOL = {"rtol": 1e-5, "atol": 1e-6}


def _lstm_weights(layer):
    return [
        ops.convert_to_numpy(w)
        for w in (layer.cell.kernel, layer.cell.recurrent_kernel, layer.cell.bias)
    ]


def test_layers_match_numpy_lstms_in_both_directions():
    bilm = BiLanguageModel(VOCAB, 4, num_layers=2, residual=True)
    representations, forward_logits, backward_logits = bilm(IDS)
    x = ops.convert_to_numpy(bilm.embedding.embeddings)[IDS]
    np.testing.assert_allclose(
        ops.convert_to_numpy(representations)[:, :, 0],
        np.concatenate([x, x], -1) * MASK[:, :, None],
        **TOL,
    )
    f1, *_ = ref.lstm_sequence(x, MASK, *_lstm_weights(bilm.forward_layers[0]))
    f2, *_ = ref.lstm_sequence(f1, MASK, *_lstm_weights(bilm.forward_layers[1]))
    b1, *_ = ref.lstm_sequence(x, MASK, *_lstm_weights(bilm.backward_layers[0]), reverse=True)
    b2, *_ = ref.lstm_sequence(b1, MASK, *_lstm_weights(bilm.backward_layers[1]), reverse=True)
    f2, b2 = f2 + f1, b2 + b1  # residual from layer 1 to layer 2
    valid = MASK[:, :, None]
    np.testing.assert_allclose(
        ops.convert_to_numpy(representations)[:, :, 1], np.concatenate([f1, b1], -1) * valid, **TOL
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(representations)[:, :, 2], np.concatenate([f2, b2], -1) * valid, **TOL
    )
    kernel, bias = (
        ops.convert_to_numpy(bilm.softmax.kernel),
        ops.convert_to_numpy(bilm.softmax.bias),
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(forward_logits), (f2 @ kernel + bias) * valid, rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(backward_logits), (b2 @ kernel + bias) * valid, rtol=1e-5, atol=1e-5
    )


def test_one_layer_equals_keras_bidirectional_on_the_embeddings():
    bilm = BiLanguageModel(VOCAB, 4, num_layers=1, cell="gru")
    representations, _, _ = bilm(IDS)
    keras_bi = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True))
    embedded = bilm.embedding(IDS)
    keras_bi(embedded, mask=MASK)
    keras_bi.forward_layer.set_weights(bilm.forward_layers[0].get_weights())
    keras_bi.backward_layer.set_weights(bilm.backward_layers[0].get_weights())
    expected = ops.convert_to_numpy(keras_bi(embedded, mask=MASK))
    np.testing.assert_allclose(
        ops.convert_to_numpy(representations)[:, :, 1], expected * MASK[:, :, None], **TOL
    )


@pytest.mark.parametrize("position", [1, 3])
def test_forward_never_sees_the_future_backward_never_the_past(position):
    bilm = BiLanguageModel(VOCAB, 6, num_layers=2, residual=True, tie_embeddings=True)
    _, forward, backward = (ops.convert_to_numpy(t) for t in bilm(IDS))
    changed = IDS.copy()
    changed[:, position] = 12  # a different real token at `position` in both rows
    representations, forward_changed, backward_changed = (
        ops.convert_to_numpy(t) for t in bilm(changed)
    )
    # Forward logits at k predict t_{k+1} from t_1..t_k: unchanged before `position`, changed at it.
    np.testing.assert_allclose(forward_changed[:, :position], forward[:, :position], **TOL)
    assert np.abs(forward_changed[:, position] - forward[:, position]).max() > 1e-4
    # Backward logits at k predict t_{k-1} from t_k..t_T: unchanged after `position`.
    np.testing.assert_allclose(
        backward_changed[:, position + 1 :], backward[:, position + 1 :], **TOL
    )
    assert np.abs(backward_changed[:, position] - backward[:, position]).max() > 1e-4


def test_padding_values_are_ignored():
    bilm = BiLanguageModel(VOCAB, 4, num_layers=2)
    clean = [ops.convert_to_numpy(t) for t in bilm(IDS, mask=MASK)]
    noisy_ids = np.where(MASK, IDS, 7)
    noisy = [ops.convert_to_numpy(t) for t in bilm(noisy_ids, mask=MASK)]
    for got, want in zip(noisy, clean, strict=True):
        np.testing.assert_allclose(got, want, **TOL)
    assert np.all(clean[0][1, 4:] == 0) and np.all(clean[1][1, 4:] == 0)


@pytest.mark.tensorflow_only
def test_language_model_loss_matches_numpy_and_decreases():
    keras.utils.set_random_seed(0)
    bilm = BiLanguageModel(VOCAB, 8, num_layers=2, tie_embeddings=True)
    _, forward, backward = bilm(IDS)
    forward_loss, backward_loss = bilm.language_model_loss(IDS, forward, backward)

    def numpy_ce(logits, targets, valid):
        logits = logits.astype(np.float64)
        log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        picked = np.take_along_axis(log_p, targets[..., None], -1)[..., 0]
        return -(picked * valid).sum() / valid.sum()

    pairs = MASK[:, 1:] & MASK[:, :-1]
    np.testing.assert_allclose(
        float(forward_loss),
        numpy_ce(ops.convert_to_numpy(forward)[:, :-1], IDS[:, 1:], pairs),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        float(backward_loss),
        numpy_ce(ops.convert_to_numpy(backward)[:, 1:], IDS[:, :-1], pairs),
        rtol=1e-5,
    )

    optimizer = keras.optimizers.Adam(0.05)
    variables = bilm.trainable_variables

    @tf.function  # traced once: the same losses as eager steps, at half the time
    def loss_and_gradients():
        with tf.GradientTape() as tape:
            _, forward, backward = bilm(IDS, training=True)
            loss = sum(bilm.language_model_loss(IDS, forward, backward))
        return loss, tape.gradient(loss, variables)

    losses = []
    for _ in range(30):
        loss, gradients = loss_and_gradients()
        assert all(
            g is not None and np.all(np.isfinite(ops.convert_to_numpy(g))) for g in gradients
        )
        optimizer.apply(gradients, variables)
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]


def test_set_use_cudnn_and_bad_arguments():
    bilm = BiLanguageModel(VOCAB, 4)
    bilm(IDS)
    bilm.set_use_cudnn(False)
    assert all(layer.use_cudnn is False for layer in bilm.forward_layers + bilm.backward_layers)
    assert all(type(layer) is keras.layers.LSTM for layer in bilm.forward_layers)
    with pytest.raises(ValueError, match="cell='rnn'"):
        BiLanguageModel(VOCAB, 4, cell="rnn")
    with pytest.raises(ValueError, match="units=0"):
        BiLanguageModel(VOCAB, 0)
    with pytest.raises(ValueError, match="dropout=1.5"):
        BiLanguageModel(VOCAB, 4, dropout=1.5)


@pytest.mark.parametrize(
    "tie_embeddings", [False, pytest.param(True, marks=pytest.mark.every_backend)]
)
def test_harness(tie_embeddings):
    # The harness' training check fits an MSE on the first output only (the representations), so
    # the softmax would get no gradient; training through both LM heads, with a finite gradient
    # for every weight, is tested above on the real loss.
    run_layer_test(
        BiLanguageModel,
        {
            "vocabulary_size": VOCAB,
            "units": 4,
            "num_layers": 2,
            "cell": "lstm",
            "residual": True,
            "dropout": 0.1,
            "tie_embeddings": tie_embeddings,
            "mask_zero": True,
            "use_cudnn": "auto",
        },
        {"inputs": IDS},
        mask=MASK,
        padded_input="inputs",
        mask_kwarg="mask",
        weights_kwarg=None,
        expected_output_shape=((2, 6, 3, 8), (2, 6, VOCAB), (2, 6, VOCAB)),
        run_training_check=False,
        atol=1e-5,
        rtol=1e-5,
    )
