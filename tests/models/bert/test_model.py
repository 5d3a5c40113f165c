import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.models import bert, bert_classifier, bert_pretraining, bert_token_classifier
from tests.lazy_tf import tf

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
    assert (
        out["mlm_logits"].shape == (2, 6, VOCAB)
        and keras.backend.standardize_dtype(out["mlm_logits"].dtype) == "float32"
    )
    changed = ids.copy()
    changed[:, -1] = 5 + (changed[:, -1] - 4) % (VOCAB - 5)
    # Not causal: changing the last token changes the first position's output.
    first = ops.convert_to_numpy(model(changed)["sequence_output"])[:, 0]
    assert np.abs(first - ops.convert_to_numpy(out["sequence_output"])[:, 0]).max() > 1e-4


def test_padding_changes_nothing_at_real_positions():
    model = tiny_bert()
    ids = np.array([[1, 7, 8, 9]], "int32")
    padded = np.array([[1, 7, 8, 9, 0, 0]], "int32")
    for key in ("sequence_output", "mlm_logits"):
        np.testing.assert_allclose(
            ops.convert_to_numpy(model(padded)[key])[:, :4],
            ops.convert_to_numpy(model(ids)[key]),
            atol=1e-5,
        )


def test_mlm_head_is_tied_to_the_token_embedding():
    model = tiny_bert()
    embedding = ops.convert_to_numpy(model.get_layer("embedding").embeddings)
    transformed = model.get_layer("mlm_norm").output
    head = keras.Model(model.input, [transformed, model.output["mlm_logits"]])
    ids = np.array([[1, 7, 8]], "int32")
    hidden, logits = (ops.convert_to_numpy(t) for t in head(ids))
    np.testing.assert_allclose(logits, hidden @ embedding.T, atol=1e-5)
    assert len([w for w in model.weights if w.path.endswith("embeddings")]) == 2


@pytest.mark.tensorflow_only
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
    logits = ops.convert_to_numpy(classifier(ids))
    assert logits.shape == (2, 3) and classifier.output.dtype == "float32"
    cls = ops.convert_to_numpy(backbone(ids)["sequence_output"])[:, 0]
    pooler, dense = classifier.get_layer("pooler"), classifier.get_layer("classifier")
    expected = np.tanh(
        cls @ ops.convert_to_numpy(pooler.kernel) + ops.convert_to_numpy(pooler.bias)
    )
    expected = expected @ ops.convert_to_numpy(dense.kernel) + ops.convert_to_numpy(dense.bias)
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    assert classifier.get_layer("encoder") is backbone.get_layer("encoder")
    classifier.save(tmp_path / "classifier.keras")
    reloaded = keras.saving.load_model(tmp_path / "classifier.keras")
    np.testing.assert_allclose(ops.convert_to_numpy(reloaded(ids)), logits, atol=1e-6)
    with pytest.raises(ValueError, match="num_classes=0"):
        bert_classifier(backbone, 0)


# The weights of `bert(..., num_layers=1)` before segments existed, in order.
SINGLE_SEQUENCE_WEIGHTS = [
    "embedding/token_embedding/embeddings",
    "embedding/position_embedding/position_embeddings",
    "embedding_norm/gamma",
    "embedding_norm/beta",
    *(
        f"encoder/block_0/self_attention/{part}"
        for part in (
            "query_kernel",
            "key_kernel",
            "value_kernel",
            "output_kernel",
            "query_bias",
            "key_bias",
            "value_bias",
            "output_bias",
        )
    ),
    "encoder/block_0/self_attention_norm/gamma",
    "encoder/block_0/self_attention_norm/beta",
    "encoder/block_0/feed_forward/hidden_dense/kernel",
    "encoder/block_0/feed_forward/hidden_dense/bias",
    "encoder/block_0/feed_forward/output_dense/kernel",
    "encoder/block_0/feed_forward/output_dense/bias",
    "encoder/block_0/feed_forward_norm/gamma",
    "encoder/block_0/feed_forward_norm/beta",
    "mlm_transform/kernel",
    "mlm_transform/bias",
    "mlm_norm/gamma",
    "mlm_norm/beta",
]
IDS = np.array([[1, 7, 8, 2, 9, 10, 2, 0], [1, 5, 2, 6, 2, 0, 0, 0]], "int32")
SEGMENTS = np.array([[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0, 0, 0]], "int32")
PAIRS = {"token_ids": IDS, "segment_ids": SEGMENTS}


def layer_norm(x, layer, epsilon=1e-12):
    mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * ops.convert_to_numpy(
        layer.gamma
    ) + ops.convert_to_numpy(layer.beta)


def test_without_segments_bert_is_the_single_sequence_model():
    model = tiny_bert(num_segments=0)
    assert [w.path for w in model.weights] == SINGLE_SEQUENCE_WEIGHTS
    assert [layer.name for layer in model.layers] == [
        "token_ids",
        "embedding",
        "embedding_norm",
        "encoder",
        "mlm_transform",
        "mlm_norm",
        "mlm_logits",
    ]
    assert not isinstance(model.input, dict) and model.input.name == "token_ids"
    # The single-sequence graph, recomposed from the model's own layers.
    embedding = model.get_layer("embedding")
    hidden = model.get_layer("encoder")(model.get_layer("embedding_norm")(embedding(IDS)))
    transformed = model.get_layer("mlm_norm")(model.get_layer("mlm_transform")(hidden))
    outputs = model(IDS)
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs["sequence_output"]), ops.convert_to_numpy(hidden), atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs["mlm_logits"]),
        ops.convert_to_numpy(embedding(transformed, reverse=True)),
        atol=1e-5,
    )


def test_segment_embedding_is_added_before_the_embedding_norm():
    model = tiny_bert(num_segments=2)
    assert sorted(model.input) == ["segment_ids", "token_ids"]
    assert [w.path for w in model.weights] == [
        *SINGLE_SEQUENCE_WEIGHTS[:2],
        "segment_embedding/embeddings",
        *SINGLE_SEQUENCE_WEIGHTS[2:],
    ]
    embedding = model.get_layer("embedding")
    table = ops.convert_to_numpy(model.get_layer("segment_embedding").embeddings)
    assert table.shape == (2, 16)
    positions = ops.convert_to_numpy(embedding.position_layer.position_embeddings)[: IDS.shape[1]]
    summed = ops.convert_to_numpy(embedding.embeddings)[IDS] + positions + table[SEGMENTS]
    norm = model.get_layer("embedding_norm")
    normalised = ops.convert_to_numpy(keras.Model(model.input, norm.output)(PAIRS))
    np.testing.assert_allclose(normalised, layer_norm(summed, norm), atol=1e-4)


def test_segments_change_the_output_and_padding_does_not():
    model = tiny_bert(num_segments=2)
    base = ops.convert_to_numpy(model(PAIRS)["sequence_output"])
    flipped = ops.convert_to_numpy(
        model({"token_ids": IDS, "segment_ids": 1 - SEGMENTS})["sequence_output"]
    )
    real = IDS != 0
    assert np.abs(flipped - base).max(-1)[real].min() > 1e-4
    # Longer padding with other segment ids there leaves every real position unchanged.
    padded = {
        "token_ids": np.pad(IDS, ((0, 0), (0, 3))),
        "segment_ids": np.pad(SEGMENTS, ((0, 0), (0, 3)), constant_values=1),
    }
    out = ops.convert_to_numpy(model(padded)["sequence_output"])[:, : IDS.shape[1]]
    np.testing.assert_allclose(out[real], base[real], atol=1e-5)
    for row, length in enumerate(real.sum(1)):
        alone = {key: value[row : row + 1, :length] for key, value in PAIRS.items()}
        np.testing.assert_allclose(
            ops.convert_to_numpy(model(alone)["sequence_output"])[0], base[row, :length], atol=1e-5
        )


def same_inputs(model, backbone):
    """Whether `model` takes the very input tensors of `backbone` (a dict is rebuilt per access)."""
    mine, theirs = model.input, backbone.input
    if not isinstance(theirs, dict):
        return mine is theirs
    return sorted(mine) == sorted(theirs) and all(mine[key] is theirs[key] for key in theirs)


def nsp_reference(sequence_output, model):
    pooler, head = model.get_layer("pooler"), model.get_layer("nsp_logits")
    pooled = np.tanh(
        sequence_output[:, 0] @ ops.convert_to_numpy(pooler.kernel)
        + ops.convert_to_numpy(pooler.bias)
    )
    return pooled @ ops.convert_to_numpy(head.kernel) + ops.convert_to_numpy(head.bias)


def test_pretraining_adds_next_sentence_prediction_on_cls(tmp_path):
    backbone = tiny_bert(num_segments=2)
    model = bert_pretraining(backbone)
    assert same_inputs(model, backbone) and sorted(model.output) == [
        "mlm_logits",
        "nsp_logits",
        "sequence_output",
    ]
    out = model(PAIRS)
    assert (
        out["nsp_logits"].shape == (2, 2)
        and keras.backend.standardize_dtype(out["nsp_logits"].dtype) == "float32"
    )
    reference = backbone(PAIRS)
    for key in ("mlm_logits", "sequence_output"):
        np.testing.assert_allclose(
            ops.convert_to_numpy(out[key]), ops.convert_to_numpy(reference[key]), atol=1e-6
        )
    np.testing.assert_allclose(
        ops.convert_to_numpy(out["nsp_logits"]),
        nsp_reference(ops.convert_to_numpy(out["sequence_output"]), model),
        atol=1e-5,
    )
    assert model.get_layer("encoder") is backbone.get_layer("encoder")
    model.save(tmp_path / "pretraining.keras")
    reloaded = keras.saving.load_model(tmp_path / "pretraining.keras")
    assert sorted(reloaded.input) == ["segment_ids", "token_ids"]
    for key, value in reloaded(PAIRS).items():
        np.testing.assert_allclose(
            ops.convert_to_numpy(value), ops.convert_to_numpy(out[key]), atol=1e-6
        )


@pytest.mark.tensorflow_only
def test_next_sentence_prediction_trains():
    """Fits one positive and one negative pair (final loss < 0.02 over 5 seeds; bound 0.1)."""
    keras.utils.set_random_seed(0)
    model = bert_pretraining(tiny_bert(num_segments=2))
    labels = np.array([1, 0])
    optimizer = keras.optimizers.Adam(1e-2)
    variables = [v for v in model.trainable_variables if not v.path.startswith("mlm_")]
    losses = []
    for _ in range(20):
        with tf.GradientTape() as tape:
            logits = model(PAIRS, training=True)["nsp_logits"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        optimizer.apply(tape.gradient(loss, variables), variables)
        losses.append(float(loss))
    assert losses[0] > 0.5 and losses[-1] < 0.1, losses


def test_a_classifier_inherits_the_pretrained_pooler_by_layer_name():
    pretraining = bert_pretraining(tiny_bert(num_segments=2))
    classifier = bert_classifier(tiny_bert(num_segments=2), 3, dropout=0.0)
    shared = {layer.name for layer in pretraining.layers} & {
        layer.name for layer in classifier.layers
    }
    assert {"pooler", "embedding", "segment_embedding", "encoder"} <= shared
    for name in shared:
        classifier.get_layer(name).set_weights(pretraining.get_layer(name).get_weights())
    pooled = keras.Model(classifier.input, classifier.get_layer("pooler").output)(PAIRS)
    expected = keras.Model(pretraining.input, pretraining.get_layer("pooler").output)(PAIRS)
    np.testing.assert_allclose(
        ops.convert_to_numpy(pooled), ops.convert_to_numpy(expected), atol=1e-6
    )


def test_classifier_of_a_backbone_with_segments():
    backbone = tiny_bert(num_segments=2)
    classifier = bert_classifier(backbone, 3, dropout=0.0)
    assert same_inputs(classifier, backbone)
    cls = ops.convert_to_numpy(backbone(PAIRS)["sequence_output"])[:, 0]
    pooler, dense = classifier.get_layer("pooler"), classifier.get_layer("classifier")
    expected = np.tanh(
        cls @ ops.convert_to_numpy(pooler.kernel) + ops.convert_to_numpy(pooler.bias)
    )
    expected = expected @ ops.convert_to_numpy(dense.kernel) + ops.convert_to_numpy(dense.bias)
    np.testing.assert_allclose(ops.convert_to_numpy(classifier(PAIRS)), expected, atol=1e-5)


@pytest.mark.parametrize("num_segments", [0, 2])
def test_token_classifier_tags_every_position(tmp_path, num_segments):
    backbone = tiny_bert(num_segments=num_segments)
    tagger = bert_token_classifier(backbone, 5, dropout=0.0)
    inputs = PAIRS if num_segments else IDS
    logits = tagger(inputs)
    assert logits.shape == (2, 8, 5) and keras.backend.standardize_dtype(logits.dtype) == "float32"
    np.testing.assert_array_equal(
        ops.convert_to_numpy(logits._keras_mask), IDS != 0
    )  # the loss skips padding
    hidden = ops.convert_to_numpy(backbone(inputs)["sequence_output"])
    dense = tagger.get_layer("token_classifier")
    expected = hidden @ ops.convert_to_numpy(dense.kernel) + ops.convert_to_numpy(dense.bias)
    np.testing.assert_allclose(ops.convert_to_numpy(logits), expected, atol=1e-5)
    assert tagger.get_layer("encoder") is backbone.get_layer("encoder")
    assert same_inputs(tagger, backbone)
    tagger.save(tmp_path / "tagger.keras")
    reloaded = keras.saving.load_model(tmp_path / "tagger.keras")
    np.testing.assert_allclose(
        ops.convert_to_numpy(reloaded(inputs)), ops.convert_to_numpy(logits), atol=1e-6
    )


def test_heads_give_float32_logits_under_mixed_precision():
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        backbone = tiny_bert(num_segments=2)
        outputs = [
            bert_pretraining(backbone)(PAIRS)["nsp_logits"],
            bert_classifier(backbone, 3)(PAIRS),
            bert_token_classifier(backbone, 4)(PAIRS),
        ]
    finally:
        keras.config.set_dtype_policy(previous)
    assert keras.backend.standardize_dtype(backbone(PAIRS)["sequence_output"].dtype) == "float16"
    for output in outputs:
        assert keras.backend.standardize_dtype(output.dtype) == "float32" and np.all(
            np.isfinite(ops.convert_to_numpy(output))
        )


def test_rejects_bad_head_arguments():
    with pytest.raises(ValueError, match="num_segments=-1"):
        tiny_bert(num_segments=-1)
    with pytest.raises(ValueError, match="num_tags=0"):
        bert_token_classifier(tiny_bert(), 0)
