import keras
import numpy as np
import pytest

from keras_attn.models import bart, bart_classifier

VOCAB, START = 30, 2


def tiny_bart(**kwargs):
    settings = dict(num_layers=1, d_model=16, num_heads=2, ff_dim=32, max_length=12, dropout=0.0)
    settings.update(kwargs)
    return bart(VOCAB, **settings)


SOURCE = np.array([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0]], "int32")
TARGET = np.array([[START, 5, 6, 7], [START, 10, 0, 0]], "int32")


def test_forward_shapes_and_one_tied_embedding():
    model = tiny_bart()
    logits = model({"source_ids": SOURCE, "target_ids": TARGET})
    assert logits.shape == (2, 4, VOCAB) and logits.dtype == "float32"
    assert len([w for w in model.weights if "token_embedding" in w.path]) == 1
    embedding = model.get_layer("embedding")
    hidden = np.random.default_rng(0).normal(size=(1, 2, 16)).astype("float32")
    np.testing.assert_allclose(
        embedding(hidden, reverse=True).numpy(), hidden @ embedding.embeddings.numpy().T, atol=1e-5
    )


def test_masks_padding_and_causality():
    model = tiny_bart()
    base = model({"source_ids": SOURCE, "target_ids": TARGET}).numpy()
    # Source padding: padded positions change nothing (row 1 without its padding).
    short = model({"source_ids": SOURCE[1:, :3], "target_ids": TARGET[1:, :2]}).numpy()
    np.testing.assert_allclose(base[1:, :2], short, atol=1e-5)
    # Decoder is causal: a later target token changes nothing before it...
    changed = TARGET.copy()
    changed[0, 3] = 20
    out = model({"source_ids": SOURCE, "target_ids": changed}).numpy()
    np.testing.assert_allclose(out[0, :3], base[0, :3], atol=1e-6)
    assert np.abs(out[0, 3] - base[0, 3]).max() > 1e-4
    # ...while the encoder is bidirectional: the last source token changes every position.
    source = SOURCE.copy()
    source[0, 4] = 20
    out = model({"source_ids": source, "target_ids": TARGET}).numpy()
    assert np.abs(out[0] - base[0]).max(axis=-1).min() > 1e-5


def test_classifier_uses_the_last_real_decoder_token(tmp_path):
    backbone = tiny_bart()
    classifier = bart_classifier(backbone, 4, dropout=0.0)
    ids = np.array([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]], "int32")
    logits = classifier(ids).numpy()
    assert logits.shape == (2, 4) and classifier.output.dtype == "float32"
    # Trailing padding changes nothing; the last real token (not the last column) is pooled.
    np.testing.assert_allclose(classifier(ids[:1, :4]).numpy(), logits[:1], atol=1e-5)
    decoder_out = keras.Model(backbone.inputs, backbone.get_layer("decoder").output)
    hidden = decoder_out({"source_ids": ids, "target_ids": ids}).numpy()
    last = hidden[[0, 1], [3, 2]]
    pooler, dense = classifier.get_layer("pooler"), classifier.get_layer("classifier")
    expected = np.tanh(last @ pooler.kernel.numpy() + pooler.bias.numpy())
    expected = expected @ dense.kernel.numpy() + dense.bias.numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    assert classifier.get_layer("decoder") is backbone.get_layer("decoder")
    classifier.save(tmp_path / "classifier.keras")
    reloaded = keras.saving.load_model(tmp_path / "classifier.keras")
    np.testing.assert_allclose(reloaded(ids).numpy(), logits, atol=1e-6)
    with pytest.raises(ValueError, match="num_classes=-1"):
        bart_classifier(backbone, -1)


def test_keras_round_trip(tmp_path):
    model = tiny_bart()
    inputs = {"source_ids": SOURCE, "target_ids": TARGET}
    model.save(tmp_path / "bart.keras")
    reloaded = keras.saving.load_model(tmp_path / "bart.keras")
    np.testing.assert_allclose(reloaded(inputs).numpy(), model(inputs).numpy(), atol=1e-6)
