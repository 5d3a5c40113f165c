import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.models import char_cnn
from keras_attn.models.char_cnn import frames_after_convolutions

LENGTH = 135  # frames: (135-6)//3=43 -> (43-6)//3=12 -> 10, 8, 6 -> (6-2)//3=1


def conv_relu(x, layer):
    kernel, bias = (
        ops.convert_to_numpy(layer.kernel),
        ops.convert_to_numpy(layer.bias),
    )  # (k, in, out)
    width = kernel.shape[0]
    windows = np.stack([x[:, i : i + width] for i in range(x.shape[1] - width + 1)], axis=1)
    return np.maximum(np.einsum("btki,kio->bto", windows, kernel) + bias, 0.0)


def max_pool(x, size):
    frames = x.shape[1] // size
    return x[:, : frames * size].reshape(x.shape[0], frames, size, -1).max(2)


def reference_logits(model, ids, alphabet_size):
    x = np.concatenate([np.zeros((1, alphabet_size)), np.eye(alphabet_size)])[ids]
    for index, pool in zip(range(1, 7), (3, 3, None, None, None, 3), strict=True):
        x = conv_relu(x, model.get_layer(f"conv_{index}"))
        if pool:
            x = max_pool(x, pool)
    x = x.reshape(x.shape[0], -1)
    for name in ("dense_7", "dense_8"):
        layer = model.get_layer(name)
        x = np.maximum(
            x @ ops.convert_to_numpy(layer.kernel) + ops.convert_to_numpy(layer.bias), 0.0
        )
    layer = model.get_layer("classifier")
    return x @ ops.convert_to_numpy(layer.kernel) + ops.convert_to_numpy(layer.bias)


def char_ids(rng, count, alphabet_size, real=100):
    ids = rng.integers(1, alphabet_size + 1, size=(count, LENGTH))
    ids[:, real:] = 0
    return ids.astype("int32")


def test_one_hot_model_matches_numpy_reference():
    keras.utils.set_random_seed(0)
    model = char_cnn(3, alphabet_size=12, input_length=LENGTH)
    ids = char_ids(np.random.default_rng(0), 2, 12)
    ids[0, 5] = 0  # an out-of-alphabet character inside the text: the zero vector
    logits = ops.convert_to_numpy(model(ids))
    assert logits.shape == (2, 3) and model.output.dtype == "float32"
    np.testing.assert_allclose(logits, reference_logits(model, ids, 12), rtol=1e-4, atol=1e-5)
    quantization = model.get_layer("char_embedding")
    assert not quantization.trainable and quantization.embeddings.shape == (13, 12)


def test_paper_sizes_give_the_paper_frames_and_parameter_counts():
    # l0 = 1014 and 70 characters: 34 frames of F features reach the first dense layer.
    assert frames_after_convolutions(1014) == (1014 - 96) // 27 == 34
    for size, features, units in (("small", 256, 1024), ("large", 1024, 2048)):
        model = char_cnn(4, alphabet_size=70, size=size)  # the paper's m = 70
        assert model.get_layer("flatten").output.shape == (None, 34 * features)
        convolutions = 7 * 70 * features + 7 * features * features + 4 * 3 * features**2
        convolutions += 6 * features
        dense = (34 * features + 1) * units + (units + 1) * units + (units + 1) * 4
        trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
        assert trainable == convolutions + dense, size
        assert model.get_layer("dropout_7").rate == model.get_layer("dropout_8").rate == 0.5
        stddev = model.get_layer("conv_1").kernel_initializer.stddev
        assert stddev == {"small": 0.05, "large": 0.02}[size]


def test_output_independent_of_the_padding_embedding():
    model = char_cnn(3, alphabet_size=12, input_length=LENGTH, embedding_dim=5, dropout=0.0)
    ids = char_ids(np.random.default_rng(1), 2, 12, real=60)
    expected = ops.convert_to_numpy(model(ids))
    table = model.get_layer("char_embedding").embeddings
    table.assign(
        np.concatenate([np.full((1, 5), 9.0), ops.convert_to_numpy(table)[1:]]).astype("float32")
    )
    np.testing.assert_allclose(ops.convert_to_numpy(model(ids)), expected, atol=1e-6)
    table.assign(
        ops.convert_to_numpy(table) * np.r_[1.0, np.full(12, 2.0)][:, None]
    )  # real rows matter
    assert np.abs(ops.convert_to_numpy(model(ids)) - expected).max() > 1e-4


def test_training_lowers_the_loss():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(2)
    # Class = which of two characters fills the text.
    labels = rng.integers(0, 2, size=32)
    ids = np.zeros((32, LENGTH), "int32")
    ids[:, :80] = np.where(rng.random((32, 80)) < 0.5, 1 + labels[:, None], 3)
    model = char_cnn(2, alphabet_size=4, input_length=LENGTH, dropout=0.0)
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    before = model.evaluate(ids, labels, verbose=0)
    model.fit(ids, labels, batch_size=16, epochs=4, verbose=0, shuffle=False)
    after = model.evaluate(ids, labels, verbose=0)
    assert after < 0.5 * before, (before, after)


def test_keras_round_trip(tmp_path):
    model = char_cnn(3, alphabet_size=12, input_length=LENGTH, embedding_dim=4)
    ids = char_ids(np.random.default_rng(3), 2, 12)
    model.save(tmp_path / "char_cnn.keras")
    reloaded = keras.saving.load_model(tmp_path / "char_cnn.keras")
    np.testing.assert_allclose(
        ops.convert_to_numpy(reloaded(ids)), ops.convert_to_numpy(model(ids)), atol=1e-6
    )


def test_user_mistakes_are_one_clear_error():
    with pytest.raises(ValueError, match="size='medium'"):
        char_cnn(2, size="medium")
    with pytest.raises(ValueError, match="input_length=122"):
        char_cnn(2, input_length=122)
    with pytest.raises(ValueError, match="num_classes=0"):
        char_cnn(0)
