"""Show, Attend and Tell: the decoder against NumPy, the regulariser, hard attention, the step
view, saving, and a tiny model that overfits a few generated scenes."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.decoding import beam_search, greedy_search
from keras_attn.models.show_attend_tell.model import (
    ShowAttendTellDecoder,
    doubly_stochastic_penalty,
    show_attend_tell,
)
from keras_attn.models.show_attend_tell.steps import ShowAttendTellSteps
from keras_attn.testing import run_layer_test
from keras_attn.vision.scenes import CAPTION_WORDS, caption_ids, scene_splits
from tests import numpy_reference as ref
from tests.lazy_tf import tf

VOCAB = 11
SMALL = {"embedding_dim": 5, "units": 7, "encoder_filters": (4, 6), "attention_units": 3}
RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(3, 16, 16, 3)).astype("uint8")
TARGETS = np.array([[1, 4, 5, 6, 2], [1, 7, 2, 0, 0], [1, 3, 3, 9, 10]], "int32")
TARGET_MASK = TARGETS != 0


def small_model(attention="soft", **kwargs):
    model = show_attend_tell(VOCAB, 16, attention=attention, **{**SMALL, **kwargs})
    # Random values in every weight, biases included, so no term of the equations hides at 0;
    # small convolutions (unsaturated scores) and a large v (attention far from uniform).
    rng = np.random.default_rng(1)
    for weight in model.weights:
        scale = 0.15 if "conv_" in weight.path else 3.0 if weight.path.endswith("/v") else 0.5
        weight.assign(rng.normal(scale=scale, size=weight.shape).astype("float32"))
    return model


def numpy_decoder(model, images, target_ids):
    """The decoder's equations (Xu et al., 2015) in NumPy: logits and alphas `(B, T, ...)`."""
    features = ops.convert_to_numpy(model.get_layer("encoder")(images)).astype("float64")
    decoder = model.get_layer("decoder")
    value = {
        w.path.split("/", 1)[1]: ops.convert_to_numpy(w).astype("float64") for w in decoder.weights
    }
    embeddings = ops.convert_to_numpy(model.get_layer("embedding").embeddings)
    projection = model.get_layer("output_projection")
    words = embeddings[target_ids]  # E y_{t-1}: (B, T, m)
    mean = features.mean(axis=1)
    h = np.tanh(mean @ value["init_h/kernel"] + value["init_h/bias"])
    c = np.tanh(mean @ value["init_c/kernel"] + value["init_c/bias"])
    logits, alphas = [], []
    for t in range(target_ids.shape[1]):
        scores = ref.additive_score(
            h[:, None, :],
            features,
            value["region_attention/score/query_kernel"],
            value["region_attention/score/key_kernel"],
            value["region_attention/score/v"],
            value["region_attention/score/bias"],
        )[:, 0]
        alpha = ref.softmax(scores)  # (B, L)
        beta = ref.sigmoid(h @ value["gate/kernel"] + value["gate/bias"])  # (B, 1)
        z = beta * np.einsum("bl,bld->bd", alpha, features)
        h, c = ref.lstm_step(
            np.concatenate([words[:, t], z], axis=-1),
            h,
            c,
            value["cell/kernel"],
            value["cell/recurrent_kernel"],
            value["cell/bias"],
        )
        deep = (
            words[:, t]
            + h @ value["state_projection/kernel"]
            + value["state_projection/bias"]
            + z @ value["context_projection/kernel"]
        )
        logits.append(
            deep @ ops.convert_to_numpy(projection.kernel) + ops.convert_to_numpy(projection.bias)
        )
        alphas.append(alpha)
    return np.stack(logits, 1), np.stack(alphas, 1)


def test_soft_decoder_equals_numpy_equations():
    model = small_model(dropout=0.3)
    outputs = model({"images": IMAGES, "target_ids": TARGETS}, training=False)
    logits, alphas = numpy_decoder(model, IMAGES, TARGETS)
    assert keras.backend.standardize_dtype(outputs["logits"].dtype) == "float32"
    assert outputs["attention"].shape == (3, 5, 4, 4)
    got_logits = ops.convert_to_numpy(outputs["logits"])
    got_alphas = ops.convert_to_numpy(outputs["attention"]).reshape(3, 5, 16)
    np.testing.assert_allclose(got_logits[TARGET_MASK], logits[TARGET_MASK], atol=2e-5)
    np.testing.assert_allclose(got_alphas[TARGET_MASK], alphas[TARGET_MASK], atol=2e-6)
    assert (got_alphas[~TARGET_MASK] == 0).all()
    # The weights are not near-uniform: the comparison sees the attention network.
    assert alphas.max() > 2.0 / 16


def test_regulariser_is_lambda_times_the_batch_mean_against_numpy():
    model = small_model(penalty=0.7)
    model({"images": IMAGES, "target_ids": TARGETS}, training=False)
    _, alphas = numpy_decoder(model, IMAGES, TARGETS)
    per_image = ((1.0 - (alphas * TARGET_MASK[..., None]).sum(axis=1)) ** 2).sum(axis=-1)
    (loss,) = model.losses
    np.testing.assert_allclose(float(loss), 0.7 * per_image.mean(), rtol=1e-5)
    np.testing.assert_allclose(
        ops.convert_to_numpy(doubly_stochastic_penalty(alphas.astype("float32"), TARGET_MASK)),
        per_image,
        rtol=1e-5,
    )
    no_penalty = small_model(penalty=0.0)
    no_penalty({"images": IMAGES, "target_ids": TARGETS})
    assert no_penalty.losses == []


@pytest.mark.tensorflow_only
def test_the_penalty_enters_fit_and_its_gradient_reaches_the_attention():
    model = small_model(penalty=1.0)
    score = model.get_layer("decoder").region_attention.score_fn
    with tf.GradientTape() as tape:
        model({"images": IMAGES, "target_ids": TARGETS}, training=True)
        loss = sum(model.losses)
    gradient = tape.gradient(loss, score.v)
    assert (
        np.isfinite(ops.convert_to_numpy(gradient)).all()
        and np.abs(ops.convert_to_numpy(gradient)).max() > 1e-4
    )


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_step_view_equals_the_teacher_forced_pass(attention):
    model = small_model(attention)
    outputs = model({"images": IMAGES, "target_ids": TARGETS}, training=False)
    steps = ShowAttendTellSteps(model)
    assert steps.grid_shape == (4, 4)
    state = steps.encode(IMAGES)
    assert not ops.convert_to_numpy(state["attention"]).any()
    for t in range(TARGETS.shape[1]):
        logits, state = steps.step(TARGETS[:, t], state)
        real = TARGET_MASK[:, t]
        np.testing.assert_allclose(
            ops.convert_to_numpy(logits)[real],
            ops.convert_to_numpy(outputs["logits"])[real, t],
            atol=1e-5,
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(state["attention"])[real],
            ops.convert_to_numpy(outputs["attention"])[real, t].reshape(-1, 16),
            atol=1e-6,
        )


def test_greedy_search_over_the_step_view_follows_the_model():
    model = small_model()
    steps = ShowAttendTellSteps(model)
    result = greedy_search(steps.step, steps.encode(IMAGES), 3, start_id=1, end_id=2, max_length=6)
    ids = ops.convert_to_numpy(result.ids)
    assert result.alignments.shape == (3, 6, 16)
    # Teacher-forcing the chosen words gives them as the argmax (PAD and START excluded).
    forced = np.concatenate([np.ones((3, 1), "int32"), ids[:, :-1]], axis=1)
    logits = ops.convert_to_numpy(
        model({"images": IMAGES, "target_ids": forced}, training=False)["logits"]
    )
    logits[..., :2] = -np.inf
    for row in range(3):
        length = next((k + 1 for k, token in enumerate(ids[row]) if token == 2), 6)
        np.testing.assert_array_equal(logits[row, :length].argmax(-1), ids[row, :length])


def test_beam_search_over_the_step_view():
    model = small_model()
    steps = ShowAttendTellSteps(model)
    greedy = greedy_search(steps.step, steps.encode(IMAGES), 3, start_id=1, end_id=2, max_length=6)
    beam = beam_search(
        steps.step, steps.encode(IMAGES), 3, start_id=1, end_id=2, max_length=6, beam_size=3
    )
    assert beam.ids.shape[0] == 3 and beam.alignments.shape[-1] == 16
    # With no length penalty the best beam is at least as probable as the greedy path.
    assert (
        ops.convert_to_numpy(beam.scores).sum(-1)
        >= ops.convert_to_numpy(greedy.scores).sum(-1) - 1e-4
    ).all()


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_mixed_precision_training_call(policy, attention):
    keras.config.set_dtype_policy(policy)
    model = show_attend_tell(VOCAB, 16, attention=attention, **SMALL)
    outputs = model({"images": IMAGES, "target_ids": TARGETS}, training=True)
    assert (
        keras.backend.standardize_dtype(outputs["logits"].dtype) == "float32"
        and keras.backend.standardize_dtype(outputs["attention"].dtype) == "float32"
    )
    assert np.isfinite(ops.convert_to_numpy(outputs["logits"])).all()
    sums = ops.convert_to_numpy(outputs["attention"]).reshape(3, 5, 16).sum(-1)
    np.testing.assert_allclose(sums, TARGET_MASK.astype("float32"), atol=1e-2)
    assert keras.backend.standardize_dtype(model.losses[0].dtype) == "float32" and np.isfinite(
        float(model.losses[0])
    )


def test_hard_attention_samples_one_region_in_training():
    model = small_model("hard")
    attention = model({"images": IMAGES, "target_ids": TARGETS}, training=True)["attention"]
    weights = ops.convert_to_numpy(attention).reshape(3, 5, 16)
    assert set(np.unique(weights)) <= {0.0, 1.0}
    np.testing.assert_array_equal(weights.sum(-1), TARGET_MASK.astype("float32"))
    inference = model({"images": IMAGES, "target_ids": TARGETS}, training=False)["attention"]
    _, alphas = numpy_decoder(model, IMAGES, TARGETS[:, :1])
    np.testing.assert_array_equal(
        ops.convert_to_numpy(inference).reshape(3, 5, 16)[:, 0].argmax(-1), alphas[:, 0].argmax(-1)
    )


def test_hard_attention_samples_follow_alpha():
    # The first step's distribution alpha_0 depends only on the image: n copies of one image
    # give n independent draws of one multinoulli. Bound: 5 standard errors per region.
    model = small_model("hard")
    n = 3000
    images = np.repeat(IMAGES[:1], n, axis=0)
    start = np.ones((n, 1), "int32")
    drawn = model({"images": images, "target_ids": start}, training=True)["attention"]
    frequencies = ops.convert_to_numpy(drawn).reshape(n, 16).mean(axis=0)
    _, alphas = numpy_decoder(model, IMAGES[:1], start[:1])
    alpha = alphas[0, 0]
    assert alpha.max() > 2.0 / 16, "a near-uniform alpha would make the check weak"
    bound = 5.0 * np.sqrt(alpha * (1.0 - alpha) / n) + 1e-3
    assert (np.abs(frequencies - alpha) <= bound).all(), (frequencies, alpha)


@pytest.mark.tensorflow_only
def test_hard_attention_gradient_is_straight_through_gumbel():
    # penalty=0: the only path from the loss to the attention network is the one-hot sample,
    # whose backward pass is the relaxed (Gumbel-softmax) sample's.
    model = small_model("hard", penalty=0.0)
    score = model.get_layer("decoder").region_attention.score_fn
    with tf.GradientTape() as tape:
        logits = model({"images": IMAGES, "target_ids": TARGETS}, training=True)["logits"]
        loss = keras.losses.sparse_categorical_crossentropy(TARGETS, logits, from_logits=True)
        loss = tf.reduce_mean(loss)
    gradients = tape.gradient(loss, [score.query_kernel, score.key_kernel, score.v])
    for gradient in gradients:
        assert (
            np.isfinite(ops.convert_to_numpy(gradient)).all()
            and np.abs(ops.convert_to_numpy(gradient)).max() > 1e-6
        )


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_keras_file_round_trip(attention, tmp_path):
    model = small_model(attention, penalty=0.4, seed=3)
    inputs = {"images": IMAGES, "target_ids": TARGETS}
    expected = model(inputs, training=False)
    path = tmp_path / "captioner.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    got = loaded(inputs, training=False)
    for key in ("logits", "attention"):
        np.testing.assert_allclose(
            ops.convert_to_numpy(got[key]), ops.convert_to_numpy(expected[key]), atol=1e-6
        )
    decoder = loaded.get_layer("decoder")
    assert (decoder.attention, decoder.penalty, decoder.seed) == (attention, 0.4, 3)
    np.testing.assert_allclose(float(loaded.losses[0]), float(model.losses[0]), rtol=1e-6)
    steps = ShowAttendTellSteps(loaded)
    logits, _ = steps.step(TARGETS[:, 0], steps.encode(IMAGES))
    np.testing.assert_allclose(
        ops.convert_to_numpy(logits), ops.convert_to_numpy(expected["logits"])[:, 0], atol=1e-5
    )


def test_model_config_round_trip():
    model = small_model()
    clone = keras.Model.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    inputs = {"images": IMAGES, "target_ids": TARGETS}
    np.testing.assert_allclose(
        ops.convert_to_numpy(clone(inputs)["logits"]),
        ops.convert_to_numpy(model(inputs)["logits"]),
        atol=1e-6,
    )


Y = RNG.normal(size=(2, 4, 5)).astype("float32")
FEATURES = RNG.normal(size=(2, 6, 3)).astype("float32")
MASK = np.array([[True, True, True, True], [True, True, False, False]])


@pytest.mark.parametrize(
    "attention", [pytest.param("soft", marks=pytest.mark.every_backend), "hard"]
)
def test_decoder_harness(attention):
    run_layer_test(
        ShowAttendTellDecoder,
        {"units": 4, "attention": attention, "attention_units": 3, "penalty": 0.5, "seed": 2},
        {"inputs": Y, "features": FEATURES},
        mask=MASK,
        padded_input="inputs",
        mask_kwarg="inputs_mask",
        weights_mask=lambda mask: mask[:, :, None],
        expected_output_shape=(2, 4, 5),
        training_samples=64 if attention == "hard" else None,
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"units": 0}, "units=0"),
        ({"attention": "local"}, "attention='local'"),
        ({"attention_units": -1}, "attention_units=-1"),
        ({"penalty": -0.1}, "penalty=-0.1"),
        ({"temperature": 0.0}, "temperature=0.0"),
        ({"seed": 1.5}, "seed=1.5"),
    ],
)
def test_decoder_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ShowAttendTellDecoder(**{"units": 4, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"image_size": 18}, "divisible"),
        ({"image_size": (16, 0)}, "image_size="),
        ({"encoder_filters": ()}, "encoder_filters="),
        ({"vocabulary_size": 0}, "vocabulary_size=0"),
        ({"dropout": 1.0}, "dropout=1.0"),
        ({"attention": "local"}, "attention='local'"),
    ],
)
def test_builder_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        show_attend_tell(**{"vocabulary_size": VOCAB, "image_size": 16, **SMALL, **kwargs})


def test_non_square_images():
    model = show_attend_tell(VOCAB, (16, 32), **SMALL)
    images = np.zeros((1, 16, 32, 3), "uint8")
    attention = model({"images": images, "target_ids": TARGETS[:1]})["attention"]
    assert attention.shape == (1, 5, 4, 8)
    np.testing.assert_allclose(ops.convert_to_numpy(attention).sum(axis=(-2, -1)), 1.0, atol=1e-6)


def scene_batch(count):
    scenes = scene_splits(seed=11, sizes={"train": count}, image_size=32)["train"]
    words = ["<pad>", "<s>", "</s>", *CAPTION_WORDS]
    ids = [caption_ids(s.caption, words, 1, 2) for s in scenes]
    width = max(len(row) for row in ids)
    padded = np.array([row + [0] * (width - len(row)) for row in ids], "int32")
    images = np.stack([s.image for s in scenes])
    return images, padded[:, :-1], padded[:, 1:], len(words)


@pytest.mark.parametrize(("attention", "epochs"), [("soft", 60), ("hard", 70)])
def test_a_tiny_model_overfits_a_few_scenes(attention, epochs):
    # The caption cross-entropy falls from about 3.1 (log of the 23-word vocabulary) by at least
    # 10x in 60 epochs (soft) / 70 epochs (hard); measured over seeds 0-2: >= 30x (soft, 60
    # epochs) and >= 15x (hard, 70 epochs); after 100 epochs >= 160x (soft) and >= 27x (hard).
    images, inputs, targets, vocabulary = scene_batch(8)
    model = show_attend_tell(
        vocabulary,
        32,
        attention=attention,
        embedding_dim=24,
        units=48,
        encoder_filters=(16, 32),
        dropout=0.0,
        penalty=0.01,
        seed=0,
    )
    model.compile(
        keras.optimizers.Adam(0.01),
        loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
    )
    features = {"images": images, "target_ids": inputs}

    def caption_loss():
        # Mean cross-entropy of the real caption tokens, the regulariser left out.
        logits = model(features, training=False)["logits"]
        loss = keras.losses.sparse_categorical_crossentropy(targets, logits, from_logits=True)
        return float(keras.ops.convert_to_numpy(loss)[targets != 0].mean())

    before = caption_loss()
    model.fit(features, {"logits": targets}, epochs=epochs, batch_size=8, verbose=0)
    after = caption_loss()
    assert after * 10.0 < before, (before, after)


def test_attention_maps_are_laid_out_like_the_image():
    # A patch filling image cell (1, 2) of the 4x4 grid can only change the annotation vectors
    # of the cells around it (the encoder's receptive field): rows 0-2, columns 1-3, regions
    # r * 4 + c in row-major order; position [r, c] of the attention maps is region r * 4 + c.
    model = small_model()
    blank = np.full((1, 16, 16, 3), 30, "uint8")
    patch = blank.copy()
    patch[0, 4:8, 8:12] = 250
    encoder = model.get_layer("encoder")
    change = np.abs(
        ops.convert_to_numpy(encoder(patch)) - ops.convert_to_numpy(encoder(blank))
    ).sum(-1)[0]  # (L,)
    changed = set(np.flatnonzero(change > 1e-6).tolist())
    around = {r * 4 + c for r in range(3) for c in range(1, 4)}
    transposed = {c * 4 + r for r in range(3) for c in range(1, 4)}
    assert 6 in changed and changed <= around and not changed <= transposed, changed
    outputs = model({"images": patch, "target_ids": TARGETS[:1]}, training=False)
    steps = ShowAttendTellSteps(model)
    _, state = steps.step(TARGETS[:1, 0], steps.encode(patch))
    maps = ops.convert_to_numpy(outputs["attention"])[0, 0]  # (4, 4)
    np.testing.assert_allclose(
        maps.reshape(-1), ops.convert_to_numpy(state["attention"])[0], atol=1e-6
    )
    assert len(np.unique(np.round(maps, 6))) > 4, "the maps vary over the grid"


def test_the_package_keeps_the_names_older_keras_files_record():
    import importlib

    # (`keras_attn.models.show_attend_tell`, the attribute, is the builder function.)
    recorded = importlib.import_module("keras_attn.models.show_attend_tell")
    assert recorded.ShowAttendTellDecoder is ShowAttendTellDecoder
