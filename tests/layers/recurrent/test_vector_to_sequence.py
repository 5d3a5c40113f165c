import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import VectorToSequence
from keras_attn.testing import run_layer_test
from tests import numpy_reference as ref

RNG = np.random.default_rng(31)
V = RNG.normal(size=(2, 3)).astype("float32")
IDS = RNG.integers(0, 4, size=(2, 5)).astype("int32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])
TOL = {"rtol": 1e-5, "atol": 1e-5}


def make(seed=0, **kwargs):
    kwargs.setdefault("output_units", 4)
    layer = VectorToSequence(6, **kwargs)
    layer.build(V.shape)
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(scale=0.5, size=w.shape) for w in layer.get_weights()])
    return layer


def numpy_decoder(layer, v, length, fed_targets=None, mask=None):
    """h = tanh(f W_f + h W_h + v R + b), o = h W_out + b_out, greedy when no targets."""
    cell = layer.cell
    q = layer.output_units
    kernel, recurrent, bias = (
        ops.convert_to_numpy(cell.kernel),
        ops.convert_to_numpy(cell.recurrent_kernel),
        ops.convert_to_numpy(cell.bias),
    )
    w_f, r = kernel[:q], kernel[q:]  # kernel rows: [f^(t-1); v]
    if layer.conditioning == "initial_state":
        assert r.shape[0] == 0
    if layer.conditioning in ("initial_state", "both"):
        dense = layer.initial_state_layer
        h = np.tanh(v @ ops.convert_to_numpy(dense.kernel) + ops.convert_to_numpy(dense.bias))
    else:
        h = np.zeros((v.shape[0], layer.units))
    mask = np.ones((v.shape[0], length), bool) if mask is None else mask
    fed = np.zeros((v.shape[0], q))
    outputs = np.zeros((v.shape[0], length, q))
    for t in range(length):
        pre = fed @ w_f + h @ recurrent + bias
        if layer.conditioning in ("every_step", "both"):
            pre = pre + v @ r  # the x^T R term
        h_new = np.tanh(pre)
        o = ref.output_projection(
            h_new, ops.convert_to_numpy(cell.output_kernel), ops.convert_to_numpy(cell.output_bias)
        )
        own = np.eye(q)[o.argmax(-1)] if layer.feedback == "categorical" else o
        nxt = own if fed_targets is None else fed_targets[:, t]
        keep = mask[:, t : t + 1]
        h = np.where(keep, h_new, h)
        fed = np.where(keep, nxt, fed)
        outputs[:, t] = np.where(keep, o, 0.0)
    return outputs


@pytest.mark.parametrize("conditioning", ["every_step", "initial_state", "both"])
def test_teacher_forcing_matches_numpy(conditioning):
    layer = make(conditioning=conditioning)
    got = ops.convert_to_numpy(layer(V, IDS, targets_mask=MASK, training=True))
    expected = numpy_decoder(layer, V, 5, np.eye(4)[IDS], MASK)
    np.testing.assert_allclose(got, expected, **TOL)
    greedy = numpy_decoder(layer, V, 5, mask=MASK)
    assert np.abs(got - greedy).max() > 1e-2


@pytest.mark.parametrize("conditioning", ["every_step", "initial_state", "both"])
def test_inference_is_greedy_generation_for_the_given_length(conditioning):
    layer = make(conditioning=conditioning, length=7)
    got = ops.convert_to_numpy(layer(V))
    assert got.shape == (2, 7, 4)
    np.testing.assert_allclose(got, numpy_decoder(layer, V, 7), **TOL)
    # Targets at inference only fix the length; their values are never read.
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(V, IDS)), numpy_decoder(layer, V, 5), **TOL
    )


def test_probability_one_is_free_running_and_continuous_feedback():
    layer = make(feedback="continuous", output_units=2)
    y = RNG.normal(size=(2, 5, 2)).astype("float32")
    forced = ops.convert_to_numpy(layer(V, y, training=True))
    np.testing.assert_allclose(forced, numpy_decoder(layer, V, 5, y), **TOL)
    free = ops.convert_to_numpy(layer(V, y, training=True, sampling_probability=1.0))
    np.testing.assert_allclose(free, numpy_decoder(layer, V, 5), **TOL)


def test_vector_conditions_every_step():
    """every_step: changing v changes every output even with all previous inputs fixed."""
    layer = make()
    other = V + 1.0
    a = ops.convert_to_numpy(layer(V, IDS, training=True))
    b = ops.convert_to_numpy(layer(other, IDS, training=True))
    assert np.all(np.abs(a - b).max(axis=-1) > 1e-4)


def test_trains_in_a_functional_model_and_round_trips(tmp_path):
    vector = keras.Input((3,))
    targets = keras.Input((5,), dtype="int32")
    decoder = VectorToSequence(6, output_units=4, length=5, conditioning="both")
    model = keras.Model([vector, targets], decoder(vector, targets))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit([V, IDS], IDS, epochs=3, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    path = tmp_path / "v2s.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(
        ops.convert_to_numpy(restored([V, IDS])), ops.convert_to_numpy(model([V, IDS])), **TOL
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="conditioning='concat'"):
        VectorToSequence(4, output_units=3, conditioning="concat")
    with pytest.raises(ValueError, match="length=0"):
        VectorToSequence(4, output_units=3, length=0)
    with pytest.raises(ValueError, match="length=None"):
        VectorToSequence(4, output_units=3)(V)


@pytest.mark.parametrize(
    "conditioning,mask_kwarg",
    [("both", "targets_mask"), pytest.param("every_step", None, marks=pytest.mark.every_backend)],
)
def test_harness(conditioning, mask_kwarg):
    run_layer_test(
        VectorToSequence,
        {
            "units": 6,
            "output_units": 4,
            "length": 5,
            "conditioning": conditioning,
            "activation": "tanh",
            "output_activation": None,
            "feedback": "categorical",
            "schedule": "constant",
            "sampling_probability": 0.0,
            "decay": None,
            "seed": 1,
        },
        {"inputs": V, "targets": IDS},
        mask=MASK,
        padded_input="targets",
        mask_kwarg=mask_kwarg,
        weights_kwarg=None,
        expected_output_shape=(2, 5, 4),
        atol=1e-5,
        rtol=1e-5,
    )
