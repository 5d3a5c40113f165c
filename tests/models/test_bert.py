import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.models import bert, bert_classifier

VOCAB, MASK = 30, 4


def tiny_bert(**kwargs):
    settings = dict(num_layers=1, d_model=16, num_heads=2, ff_dim=32, max_length=12, dropout=0.0)
    settings.update(kwargs)
    return bert(VOCAB, **settings)


def test_outputs_and_bidirectional_attention():
    model = tiny_bert()
    ids = np.random.default_rng(0).integers(5, VOCAB, size=(2, 6)).astype("int32")
    out = model(ids)
    assert out["sequence_output"].shape == (2, 6, 16)
    assert out["mlm_logits"].shape == (2, 6, VOCAB) and out["mlm_logits"].dtype == "float32"
    changed = ids.copy()
    changed[:, -1] = 5 + (changed[:, -1] - 4) % (VOCAB - 5)
    # Not causal: changing the last token changes the first position's output.
    first = model(changed)["sequence_output"].numpy()[:, 0]
    assert np.abs(first - out["sequence_output"].numpy()[:, 0]).max() > 1e-4


def test_padding_changes_nothing_at_real_positions():
    model = tiny_bert()
    ids = np.array([[1, 7, 8, 9]], "int32")
    padded = np.array([[1, 7, 8, 9, 0, 0]], "int32")
    for key in ("sequence_output", "mlm_logits"):
        np.testing.assert_allclose(
            model(padded)[key].numpy()[:, :4], model(ids)[key].numpy(), atol=1e-5
        )


def test_mlm_head_is_tied_to_the_token_embedding():
    model = tiny_bert()
    embedding = model.get_layer("embedding").embeddings.numpy()
    transformed = model.get_layer("mlm_norm").output
    head = keras.Model(model.input, [transformed, model.output["mlm_logits"]])
    ids = np.array([[1, 7, 8]], "int32")
    hidden, logits = (t.numpy() for t in head(ids))
    np.testing.assert_allclose(logits, hidden @ embedding.T, atol=1e-5)
    assert len([w for w in model.weights if w.path.endswith("embeddings")]) == 2


def test_masked_lm_loss_decreases():
    model = tiny_bert()
    rng = np.random.default_rng(0)
    ids = rng.integers(5, VOCAB, size=(8, 10)).astype("int32")
    masked = rng.random(ids.shape) < 0.3
    inputs = np.where(masked, MASK, ids).astype("int32")
    labels = np.where(masked, ids, 0)  # scored only where masked
    optimizer = keras.optimizers.Adam(1e-2)

    def loss_value():
        logits = model(inputs, training=True)["mlm_logits"]
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        return tf.reduce_sum(losses * masked) / masked.sum()

    losses = []
    for _ in range(8):
        with tf.GradientTape() as tape:
            loss = loss_value()
        variables = model.trainable_variables
        optimizer.apply(tape.gradient(loss, variables), variables)
        losses.append(float(loss))
    assert losses[-1] < 0.8 * losses[0], losses


def test_classifier_pools_cls_and_shares_the_backbone(tmp_path):
    backbone = tiny_bert()
    classifier = bert_classifier(backbone, 3, dropout=0.0)
    ids = np.array([[1, 7, 8, 9, 0], [1, 5, 0, 0, 0]], "int32")
    logits = classifier(ids).numpy()
    assert logits.shape == (2, 3) and classifier.output.dtype == "float32"
    cls = backbone(ids)["sequence_output"].numpy()[:, 0]
    pooler, dense = classifier.get_layer("pooler"), classifier.get_layer("classifier")
    expected = np.tanh(cls @ pooler.kernel.numpy() + pooler.bias.numpy())
    expected = expected @ dense.kernel.numpy() + dense.bias.numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    assert classifier.get_layer("encoder") is backbone.get_layer("encoder")
    classifier.save(tmp_path / "classifier.keras")
    reloaded = keras.saving.load_model(tmp_path / "classifier.keras")
    np.testing.assert_allclose(reloaded(ids).numpy(), logits, atol=1e-6)
    with pytest.raises(ValueError, match="num_classes=0"):
        bert_classifier(backbone, 0)
