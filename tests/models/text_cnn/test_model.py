import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.models import text_cnn

VOCAB, DIM = 20, 6


def tiny(variant="rand", embeddings=None, **kwargs):
    settings = dict(embedding_dim=DIM, filter_sizes=(2, 3), num_filters=4, dropout=0.0)
    settings.update(kwargs)
    return text_cnn(VOCAB, 3, variant=variant, embeddings=embeddings, **settings)


def pretrained(seed=0):
    return np.random.default_rng(seed).normal(size=(VOCAB, DIM)).astype("float32")


def reference_logits(model, ids):
    """Kim's equations in NumPy: h - 1 zeros on both sides, max over windows with a real token."""
    channels = [ops.convert_to_numpy(model.get_layer("embedding").embeddings)]
    if "static_embedding" in [layer.name for layer in model.layers]:
        channels.append(ops.convert_to_numpy(model.get_layer("static_embedding").embeddings))
    x = np.concatenate([table[ids] for table in channels], axis=-1)  # (batch, T, c * d)
    mask = ids != 0
    x = x * mask[..., None]
    features = []
    for layer in model.layers:
        if not layer.name.startswith("conv_"):
            continue
        kernel, bias = (
            ops.convert_to_numpy(layer.kernel),
            ops.convert_to_numpy(layer.bias),
        )  # (h, c * d, n), (n,)
        width = kernel.shape[0]
        padded = np.pad(x, ((0, 0), (width - 1, width - 1), (0, 0)))
        padded_mask = np.pad(mask, ((0, 0), (width - 1, width - 1)))
        starts = range(ids.shape[1] + width - 1)
        windows = np.stack([padded[:, i : i + width] for i in starts], axis=1)
        real = np.stack([padded_mask[:, i : i + width].any(1) for i in starts], axis=1)
        maps = np.maximum(np.einsum("btwd,wdn->btn", windows, kernel) + bias, 0.0)
        maps = np.where(real[..., None], maps, -np.inf)
        features.append(np.where(mask.any(1, keepdims=True), maps.max(1), 0.0))
    dense = model.get_layer("classifier")
    return np.concatenate(features, -1) @ ops.convert_to_numpy(dense.kernel) + ops.convert_to_numpy(
        dense.bias
    )


IDS = np.array([[3, 4, 5, 6, 7], [8, 9, 0, 0, 0], [10, 0, 0, 0, 0]], "int32")


@pytest.mark.parametrize("variant", ["rand", "multichannel"])
def test_logits_match_numpy_reference(variant):
    model = tiny(variant, None if variant == "rand" else pretrained())
    logits = ops.convert_to_numpy(model(IDS))
    assert logits.shape == (3, 3) and model.output.dtype == "float32"
    np.testing.assert_allclose(logits, reference_logits(model, IDS), atol=1e-5)


def test_output_independent_of_padding_length_and_padding_embedding():
    model = tiny("non-static", pretrained(), filter_sizes=(2, 5))
    short = np.array([[3, 4]], "int32")
    expected = ops.convert_to_numpy(model(short))
    table = model.get_layer("embedding").embeddings
    table.assign(
        np.concatenate([np.full((1, DIM), 50.0), ops.convert_to_numpy(table)[1:]]).astype("float32")
    )
    for padding in (1, 4, 9):
        padded = np.pad(short, ((0, 0), (0, padding)))
        np.testing.assert_allclose(ops.convert_to_numpy(model(padded)), expected, atol=1e-5)
    # A row with no real token: zero features, so the logits are the bias.
    empty = ops.convert_to_numpy(model(np.zeros((1, 4), "int32")))
    np.testing.assert_allclose(
        empty, ops.convert_to_numpy(model.get_layer("classifier").bias)[None], atol=0
    )


def test_paper_sizes_give_the_paper_parameter_counts():
    # 3 widths x 100 maps over 300-d word2vec vectors, 2 classes (e.g. MR).
    vocabulary = 1000
    convolutions = sum(h * 300 * 100 + 100 for h in (3, 4, 5))
    classifier = 300 * 2 + 2
    model = text_cnn(vocabulary, 2)
    assert model.get_layer("features").output.shape == (None, 300)
    assert model.count_params() == vocabulary * 300 + convolutions + classifier
    assert model.get_layer("dropout").rate == 0.5
    assert model.get_layer("classifier").kernel_constraint.max_value == 3.0
    matrix = np.zeros((vocabulary, 300), "float32")
    multichannel = text_cnn(vocabulary, 2, variant="multichannel", embeddings=matrix)
    # Each filter spans both channels: twice the input width.
    two_channel_convolutions = sum(h * 600 * 100 + 100 for h in (3, 4, 5))
    trainable = sum(int(np.prod(w.shape)) for w in multichannel.trainable_weights)
    frozen = sum(int(np.prod(w.shape)) for w in multichannel.non_trainable_weights)
    assert trainable == vocabulary * 300 + two_channel_convolutions + classifier
    assert frozen == vocabulary * 300


def toy_task(rng, count=48):
    """Class k = the sentence contains token 3 + k somewhere (other tokens are noise)."""
    labels = rng.integers(0, 3, size=count)
    ids = rng.integers(6, VOCAB, size=(count, 7))
    ids[np.arange(count), rng.integers(0, 5, size=count)] = 3 + labels
    lengths = rng.integers(5, 8, size=count)
    ids[np.arange(7)[None] >= lengths[:, None]] = 0
    return ids.astype("int32"), labels


def train(model, ids, labels, steps=12):
    model.compile(
        keras.optimizers.Adam(2e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    before = model.evaluate(ids, labels, verbose=0)
    model.fit(ids, labels, batch_size=16, epochs=steps // 3, verbose=0, shuffle=False)
    return before, model.evaluate(ids, labels, verbose=0)


@pytest.mark.parametrize(
    "variant, frozen, trained",
    [
        ("static", ["embedding"], []),
        ("non-static", [], ["embedding"]),
        ("multichannel", ["static_embedding"], ["embedding"]),
    ],
)
def test_static_channels_stay_fixed_and_non_static_ones_move(variant, frozen, trained):
    keras.utils.set_random_seed(0)
    vectors = pretrained()
    model = tiny(variant, vectors)
    for name in frozen + trained:
        np.testing.assert_array_equal(
            ops.convert_to_numpy(model.get_layer(name).embeddings), vectors
        )
    ids, labels = toy_task(np.random.default_rng(0))
    before, after = train(model, ids, labels)
    assert after < 0.8 * before, (before, after)
    for name in frozen:
        np.testing.assert_array_equal(
            ops.convert_to_numpy(model.get_layer(name).embeddings), vectors
        )
    for name in trained:
        moved = np.abs(ops.convert_to_numpy(model.get_layer(name).embeddings) - vectors)[1:].max()
        assert moved > 1e-3, name


def test_rand_training_lowers_the_loss_and_keeps_the_max_norm():
    keras.utils.set_random_seed(0)
    model = tiny("rand", max_norm=0.5)
    ids, labels = toy_task(np.random.default_rng(1))
    before, after = train(model, ids, labels, steps=15)
    assert after < 0.7 * before, (before, after)
    norms = np.linalg.norm(ops.convert_to_numpy(model.get_layer("classifier").kernel), axis=0)
    assert norms.max() <= 0.5 + 1e-5, norms


def test_keras_round_trip_keeps_outputs_and_the_frozen_channel(tmp_path):
    model = tiny("multichannel", pretrained())
    model.save(tmp_path / "text_cnn.keras")
    reloaded = keras.saving.load_model(tmp_path / "text_cnn.keras")
    np.testing.assert_allclose(
        ops.convert_to_numpy(reloaded(IDS)), ops.convert_to_numpy(model(IDS)), atol=1e-6
    )
    assert not reloaded.get_layer("static_embedding").trainable
    assert reloaded.get_layer("embedding").trainable


def test_user_mistakes_are_one_clear_error():
    with pytest.raises(ValueError, match="variant='cnn'"):
        text_cnn(VOCAB, 2, variant="cnn")
    with pytest.raises(ValueError, match="Expected embeddings for variant='static'"):
        text_cnn(VOCAB, 2, variant="static")
    with pytest.raises(ValueError, match=r"shape=\(5, 6\)"):
        text_cnn(VOCAB, 2, variant="non-static", embeddings=np.zeros((5, 6)))
    with pytest.raises(ValueError, match="no embeddings for variant='rand'"):
        text_cnn(VOCAB, 2, embeddings=pretrained())
    with pytest.raises(ValueError, match="num_classes=0"):
        text_cnn(VOCAB, 0)
