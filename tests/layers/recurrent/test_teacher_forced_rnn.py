import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import JordanRNN, TeacherForcedRNN
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(21)
X = RNG.normal(size=(2, 5, 3)).astype("float32")
Y = RNG.normal(size=(2, 5, 2)).astype("float32")
IDS = RNG.integers(0, 4, size=(2, 5)).astype("int32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])
TOL = {"rtol": 1e-5, "atol": 1e-5}


def make(seed=0, **kwargs):
    """A built layer with random weights (biases included)."""
    kwargs.setdefault("output_units", 2)
    layer = TeacherForcedRNN(6, **kwargs)
    layer.build(X.shape)
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(scale=0.5, size=w.shape) for w in layer.get_weights()])
    return layer


def numpy_loop(layer, x, fed_targets, use_own, mask):
    """h = tanh(x W_x + f W_f + b), o = h W_out + b_out, f = y or pred(o)."""
    cell = layer.cell
    kernel, recurrent, bias = (
        ops.convert_to_numpy(cell.kernel),
        ops.convert_to_numpy(cell.recurrent_kernel),
        ops.convert_to_numpy(cell.bias),
    )
    output_kernel, output_bias = (
        ops.convert_to_numpy(cell.output_kernel),
        ops.convert_to_numpy(cell.output_bias),
    )
    batch, steps, _ = x.shape
    q = layer.output_units
    fed = np.zeros((batch, q))
    outputs = np.zeros((batch, steps, q))
    for t in range(steps):
        h = ref.elman_step(x[:, t], fed, kernel, recurrent, bias)
        o = ref.output_projection(h, output_kernel, output_bias)
        own = o if layer.feedback == "continuous" else np.eye(q)[o.argmax(-1)]
        keep = mask[:, t : t + 1]
        fed = np.where(keep, np.where(use_own[:, t : t + 1], own, fed_targets[:, t]), fed)
        outputs[:, t] = np.where(keep, o, 0.0)
    return outputs


def teacher_forced(layer, x, y, mask):
    return numpy_loop(layer, x, y, np.zeros(mask.shape, bool), mask)


def free_running(layer, x, mask):
    fed = np.zeros(x.shape[:2] + (layer.output_units,))
    return numpy_loop(layer, x, fed, np.ones(mask.shape, bool), mask)


def test_probability_zero_in_training_is_pure_teacher_forcing():
    layer = make()
    got = ops.convert_to_numpy(layer(X, Y, inputs_mask=MASK, training=True))
    np.testing.assert_allclose(got, teacher_forced(layer, X, Y, MASK), **TOL)
    assert np.abs(got - free_running(layer, X, MASK)).max() > 1e-2
    assert np.all(got[1, 3:] == 0.0)


@pytest.mark.parametrize("feedback", ["continuous", "categorical"])
def test_inference_is_the_numpy_free_running_loop(feedback):
    layer = make(feedback=feedback, output_units=4 if feedback == "categorical" else 2)
    targets = IDS if feedback == "categorical" else Y
    expected = free_running(layer, X, MASK)
    np.testing.assert_allclose(ops.convert_to_numpy(layer(X, inputs_mask=MASK)), expected, **TOL)
    # Targets given at inference are ignored.
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(X, targets, inputs_mask=MASK)), expected, **TOL
    )


@pytest.mark.parametrize("feedback", ["continuous", "categorical"])
def test_probability_one_in_training_is_free_running(feedback):
    layer = make(feedback=feedback, output_units=4 if feedback == "categorical" else 2)
    targets = IDS if feedback == "categorical" else Y
    got = layer(X, targets, inputs_mask=MASK, sampling_probability=1.0, training=True)
    np.testing.assert_allclose(ops.convert_to_numpy(got), free_running(layer, X, MASK), **TOL)


def test_categorical_teacher_forcing_feeds_one_hot_targets():
    layer = make(feedback="categorical", output_units=4)
    got = ops.convert_to_numpy(layer(X, IDS, inputs_mask=MASK, training=True))
    np.testing.assert_allclose(got, teacher_forced(layer, X, np.eye(4)[IDS], MASK), **TOL)


def test_teacher_forcing_decouples_the_steps():
    """With p = 0, y^(t) reaches only step t + 1: there is no hidden-to-hidden path."""
    layer = make()
    changed = Y.copy()
    changed[:, 2] += 1.0
    a = ops.convert_to_numpy(layer(X, Y, training=True))
    b = ops.convert_to_numpy(layer(X, changed, training=True))
    differs = np.abs(a - b).max(axis=(0, 2)) > 1e-4
    np.testing.assert_array_equal(differs, [False, False, False, True, False])


def test_scheduled_sampling_mixes_truth_and_own_predictions():
    """p = 0.3: every step fed one of the two, the model's own prediction ~30% of the time."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(200, 8, 3)).astype("float32")
    y = rng.normal(size=(200, 8, 2)).astype("float32")
    layer = make(seed=1, sampling_probability=0.3)
    got = ops.convert_to_numpy(layer(x, y, training=True))
    cell = layer.cell
    weights = [ops.convert_to_numpy(w) for w in (cell.kernel, cell.recurrent_kernel, cell.bias)]

    def output_given(fed):
        """o^(t) for t >= 1 had f^(t-1) = fed[:, t-1]; flattened over (batch, T-1)."""
        h = ref.elman_step(x[:, 1:].reshape(-1, 3), fed[:, :-1].reshape(-1, 2), *weights)
        o = ref.output_projection(
            h, ops.convert_to_numpy(cell.output_kernel), ops.convert_to_numpy(cell.output_bias)
        )
        return np.abs(o - got[:, 1:].reshape(-1, 2)).max(-1) < 1e-4

    from_truth, from_own = output_given(y), output_given(got)
    assert np.all(from_truth | from_own)
    assert abs(from_own.mean() - 0.3) < 0.05


@pytest.mark.parametrize(
    "schedule,decay,expected",
    [
        ("linear", 0.1, lambda i: np.minimum(1.0, 0.1 * i)),
        ("exponential", 0.9, lambda i: 1.0 - 0.9**i),
        ("inverse_sigmoid", 5.0, lambda i: 1.0 - 5.0 / (5.0 + np.exp(i / 5.0))),
    ],
)
def test_schedules_follow_bengio_et_al(schedule, decay, expected):
    layer = TeacherForcedRNN(4, output_units=2, schedule=schedule, decay=decay)
    steps = np.array([0, 1, 5, 20, 100])
    got = np.array([float(layer.sampling_probability_at(i)) for i in steps])
    np.testing.assert_allclose(got, expected(steps.astype(np.float64)), rtol=1e-5, atol=1e-6)
    capped = TeacherForcedRNN(
        4, output_units=2, schedule=schedule, decay=decay, sampling_probability=0.25
    )
    assert float(capped.sampling_probability_at(1000)) == pytest.approx(0.25)


def test_training_step_drives_the_schedule():
    layer = make(schedule="linear", decay=0.5)
    at_start = ops.convert_to_numpy(layer(X, Y, inputs_mask=MASK, step=0, training=True))
    later = ops.convert_to_numpy(layer(X, Y, inputs_mask=MASK, step=2, training=True))
    np.testing.assert_allclose(at_start, teacher_forced(layer, X, Y, MASK), **TOL)
    np.testing.assert_allclose(later, free_running(layer, X, MASK), **TOL)
    with pytest.raises(ValueError, match="step="):
        layer(X, Y, training=True)


class ScheduledModel(keras.Model):
    """The documented way to drive a decaying schedule from `fit`: the optimizer's step."""

    def __init__(self):
        super().__init__()
        self.rnn = TeacherForcedRNN(6, output_units=2, schedule="linear", decay=0.25)

    def call(self, inputs, training=False):
        x, y = inputs
        return self.rnn(x, y, step=self.optimizer.iterations, training=training)


# Keras' JAX trainer does not map the optimizer's variables into the forward pass (only into
# its loss scaling), so `self.optimizer.iterations` cannot be read in `call` there
# (docs/recurrent.md says so).
@pytest.mark.tensorflow_only
def test_fit_drives_the_schedule_with_optimizer_iterations():
    model = ScheduledModel()
    model.compile(keras.optimizers.Adam(1e-2), "mse")
    history = model.fit([X, Y], Y, batch_size=1, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert int(model.optimizer.iterations) == 4
    # p_4 = min(1, 0.25 * 4) = 1: a training call now runs free.
    got = ops.convert_to_numpy(model([X, Y], training=True))
    np.testing.assert_allclose(got, free_running(model.rnn, X, np.ones_like(MASK)), **TOL)


def test_inference_equals_jordan_rnn_with_the_same_weights():
    layer = make()
    jordan = JordanRNN(6, output_units=2, return_sequences=True)
    jordan(X)
    jordan.set_weights(layer.get_weights())
    valid = MASK[:, :, None]
    np.testing.assert_allclose(
        np.where(valid, ops.convert_to_numpy(layer(X, inputs_mask=MASK)), 0),
        np.where(valid, ops.convert_to_numpy(jordan(X, mask=MASK)), 0),
        **TOL,
    )


def test_keras_mask_flows_in_and_out():
    tokens = keras.Input((None,), dtype="int32")
    targets = keras.Input((None, 2))
    embedded = keras.layers.Embedding(10, 3, mask_zero=True)(tokens)
    outputs = TeacherForcedRNN(6, output_units=2)(embedded, targets)
    pooled = keras.layers.GlobalAveragePooling1D()(outputs)
    model = keras.Model([tokens, targets], [outputs, pooled])
    out, mean = model([np.array([[3, 4, 0]]), Y[:1, :3]])
    assert np.all(ops.convert_to_numpy(out)[0, 2] == 0.0)
    np.testing.assert_allclose(
        ops.convert_to_numpy(mean)[0], ops.convert_to_numpy(out)[0, :2].mean(0), rtol=1e-5
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="feedback='ids'"):
        TeacherForcedRNN(4, output_units=2, feedback="ids")
    with pytest.raises(ValueError, match="schedule='cosine'"):
        TeacherForcedRNN(4, output_units=2, schedule="cosine")
    with pytest.raises(ValueError, match="decay=1.5"):
        TeacherForcedRNN(4, output_units=2, schedule="exponential", decay=1.5)
    with pytest.raises(ValueError, match="decay=None"):
        TeacherForcedRNN(4, output_units=2, schedule="linear")
    with pytest.raises(ValueError, match="decay=0.5"):
        TeacherForcedRNN(4, output_units=2, decay=0.5)
    with pytest.raises(ValueError, match="sampling_probability=2"):
        TeacherForcedRNN(4, output_units=2, sampling_probability=2)
    with pytest.raises(ValueError, match="units=0"):
        TeacherForcedRNN(0, output_units=2)


@pytest.mark.parametrize(
    "feedback,targets,mask_kwarg",
    [
        ("continuous", Y, "inputs_mask"),
        pytest.param("categorical", IDS, None, marks=pytest.mark.every_backend),
    ],
)
def test_harness(feedback, targets, mask_kwarg):
    run_layer_test(
        TeacherForcedRNN,
        {
            "units": 6,
            "output_units": 2 if feedback == "continuous" else 4,
            "activation": "tanh",
            "output_activation": None,
            "feedback": feedback,
            "schedule": "inverse_sigmoid",
            "sampling_probability": 0.0,
            "decay": 10.0,
            "seed": 3,
        },
        {"inputs": X, "targets": targets},
        call_kwargs={"step": 0},
        mask=MASK,
        padded_input="inputs",
        mask_kwarg=mask_kwarg,
        weights_kwarg=None,
        expected_output_shape=(2, 5, 2 if feedback == "continuous" else 4),
        atol=1e-5,
        rtol=1e-5,
    )
