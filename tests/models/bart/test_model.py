import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.models import bart, bart_classifier, bart_token_classifier
from keras_attn.models.bart.model import bart_translator, bart_translator_first_stage_variables

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
    assert (
        logits.shape == (2, 4, VOCAB) and keras.backend.standardize_dtype(logits.dtype) == "float32"
    )
    assert len([w for w in model.weights if "token_embedding" in w.path]) == 1
    embedding = model.get_layer("embedding")
    hidden = np.random.default_rng(0).normal(size=(1, 2, 16)).astype("float32")
    np.testing.assert_allclose(
        ops.convert_to_numpy(embedding(hidden, reverse=True)),
        hidden @ ops.convert_to_numpy(embedding.embeddings).T,
        atol=1e-5,
    )


def test_masks_padding_and_causality():
    model = tiny_bart()
    base = ops.convert_to_numpy(model({"source_ids": SOURCE, "target_ids": TARGET}))
    # Source padding: padded positions change nothing (row 1 without its padding).
    short = ops.convert_to_numpy(
        model({"source_ids": SOURCE[1:, :3], "target_ids": TARGET[1:, :2]})
    )
    np.testing.assert_allclose(base[1:, :2], short, atol=1e-5)
    # Decoder is causal: a later target token changes nothing before it...
    changed = TARGET.copy()
    changed[0, 3] = 20
    out = ops.convert_to_numpy(model({"source_ids": SOURCE, "target_ids": changed}))
    np.testing.assert_allclose(out[0, :3], base[0, :3], atol=1e-6)
    assert np.abs(out[0, 3] - base[0, 3]).max() > 1e-4
    # ...while the encoder is bidirectional: the last source token changes every position.
    source = SOURCE.copy()
    source[0, 4] = 20
    out = ops.convert_to_numpy(model({"source_ids": source, "target_ids": TARGET}))
    assert np.abs(out[0] - base[0]).max(axis=-1).min() > 1e-5


def test_classifier_uses_the_last_real_decoder_token(tmp_path):
    backbone = tiny_bart()
    classifier = bart_classifier(backbone, 4, dropout=0.0)
    ids = np.array([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]], "int32")
    logits = ops.convert_to_numpy(classifier(ids))
    assert logits.shape == (2, 4) and classifier.output.dtype == "float32"
    # Trailing padding changes nothing; the last real token (not the last column) is pooled.
    np.testing.assert_allclose(ops.convert_to_numpy(classifier(ids[:1, :4])), logits[:1], atol=1e-5)
    decoder_out = keras.Model(backbone.inputs, backbone.get_layer("decoder").output)
    hidden = ops.convert_to_numpy(decoder_out({"source_ids": ids, "target_ids": ids}))
    last = hidden[[0, 1], [3, 2]]
    pooler, dense = classifier.get_layer("pooler"), classifier.get_layer("classifier")
    expected = np.tanh(
        last @ ops.convert_to_numpy(pooler.kernel) + ops.convert_to_numpy(pooler.bias)
    )
    expected = expected @ ops.convert_to_numpy(dense.kernel) + ops.convert_to_numpy(dense.bias)
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    assert classifier.get_layer("decoder") is backbone.get_layer("decoder")
    classifier.save(tmp_path / "classifier.keras")
    reloaded = keras.saving.load_model(tmp_path / "classifier.keras")
    np.testing.assert_allclose(ops.convert_to_numpy(reloaded(ids)), logits, atol=1e-6)
    with pytest.raises(ValueError, match="num_classes=-1"):
        bart_classifier(backbone, -1)


def test_tagger_classifies_every_decoder_state(tmp_path):
    """Lewis et al. (2019), section 3.2: the same ids feed encoder and decoder, and the decoder's
    top state at each position is classified: logits = h W_t + b_t (NumPy, copied weights)."""
    backbone = tiny_bart()
    tagger = bart_token_classifier(backbone, 3, dropout=0.0)
    ids = np.array([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]], "int32")
    logits = ops.convert_to_numpy(tagger(ids))
    assert logits.shape == (2, 6, 3) and tagger.output.dtype == "float32"
    decoder_out = keras.Model(backbone.inputs, backbone.get_layer("decoder").output)
    hidden = ops.convert_to_numpy(decoder_out({"source_ids": ids, "target_ids": ids}))
    head = tagger.get_layer("token_classifier")
    expected = hidden @ ops.convert_to_numpy(head.kernel) + ops.convert_to_numpy(head.bias)
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    # Position 1 has read token 1 (self-attention, causal) and the whole row (cross-attention).
    later = ids.copy()
    later[0, 3] = 20
    changed = ops.convert_to_numpy(tagger(later))
    assert np.abs(changed[0, 1] - logits[0, 1]).max() > 1e-5
    assert tagger.get_layer("encoder") is backbone.get_layer("encoder")
    tagger.save(tmp_path / "tagger.keras")
    np.testing.assert_allclose(
        ops.convert_to_numpy(keras.saving.load_model(tmp_path / "tagger.keras")(ids)),
        logits,
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="num_tags=0"):
        bart_token_classifier(backbone, 0)


def test_keras_round_trip(tmp_path):
    model = tiny_bart()
    inputs = {"source_ids": SOURCE, "target_ids": TARGET}
    model.save(tmp_path / "bart.keras")
    reloaded = keras.saving.load_model(tmp_path / "bart.keras")
    np.testing.assert_allclose(
        ops.convert_to_numpy(reloaded(inputs)), ops.convert_to_numpy(model(inputs)), atol=1e-6
    )


SETTINGS = dict(num_layers=1, d_model=16, num_heads=2, ff_dim=32, max_length=12, dropout=0.0)


def weight_shapes(model):
    return {w.path: tuple(w.shape) for w in model.weights}


def test_plain_translator_is_bart_with_the_same_weights_and_outputs():
    pretrained = tiny_bart()
    translator = bart_translator(VOCAB, VOCAB, **SETTINGS)
    assert [w.path for w in translator.weights] == [w.path for w in pretrained.weights]
    assert weight_shapes(translator) == weight_shapes(pretrained)
    translator.set_weights(pretrained.get_weights())
    inputs = {"source_ids": SOURCE, "target_ids": TARGET}
    np.testing.assert_allclose(
        ops.convert_to_numpy(translator(inputs)),
        ops.convert_to_numpy(pretrained(inputs)),
        atol=1e-6,
    )
    assert translator.name == "bart_translator"
    with pytest.raises(ValueError, match="source_vocabulary_size=31, target_vocabulary_size=30"):
        bart_translator(31, VOCAB)


def test_new_source_encoder_adds_its_own_weights_to_barts():
    pretrained = weight_shapes(tiny_bart())
    translator = bart_translator(50, VOCAB, new_source_encoder_layers=2, **SETTINGS)
    shapes = weight_shapes(translator)
    new = {path: shape for path, shape in shapes.items() if path not in pretrained}
    # Every weight of BART is there with its shape; only the new source side is added.
    assert {path: shapes[path] for path in pretrained} == pretrained
    assert {path.split("/")[0] for path in new} == {"source_embedding", "source_encoder"}
    assert new["source_embedding/token_embedding/embeddings"] == (50, 16)
    assert new["source_embedding/position_embedding/position_embeddings"] == (12, 16)
    assert {path.split("/")[1] for path in new if path.startswith("source_encoder")} == {
        "block_0",
        "block_1",
    }
    assert shapes["embedding/token_embedding/embeddings"] == (VOCAB, 16)
    with pytest.raises(ValueError, match="new_source_encoder_layers=-1"):
        bart_translator(50, VOCAB, new_source_encoder_layers=-1)


def test_new_source_encoder_feeds_barts_encoder_in_place_of_its_embedding():
    translator = bart_translator(50, VOCAB, new_source_encoder_layers=1, **SETTINGS)
    source = np.array([[45, 6, 49, 8, 9], [10, 47, 12, 0, 0]], "int32")  # ids beyond BART's 30
    logits = ops.convert_to_numpy(translator({"source_ids": source, "target_ids": TARGET}))
    assert logits.shape == (2, 4, VOCAB)
    layer = translator.get_layer
    encoded = layer("source_encoder")(layer("source_embedding")(source))
    memory = layer("encoder")(layer("encoder_embedding_norm")(encoded))
    target = layer("decoder_embedding_norm")(layer("embedding")(TARGET))
    hidden = layer("decoder")(target, memory)
    expected = ops.convert_to_numpy(layer("embedding")(hidden, reverse=True))
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    # The source padding is masked through the new encoder as well.
    short = ops.convert_to_numpy(
        translator({"source_ids": source[1:, :3], "target_ids": TARGET[1:]})
    )
    np.testing.assert_allclose(short, logits[1:], atol=1e-5)


def test_first_stage_variables_are_the_new_encoder_positions_and_first_input_projections():
    settings = dict(SETTINGS, num_layers=2)
    translator = bart_translator(50, VOCAB, new_source_encoder_layers=1, **settings)
    paths = {v.path for v in bart_translator_first_stage_variables(translator)}
    new = {w.path for w in translator.weights if w.path.startswith("source_")}
    projections = {
        f"encoder/block_0/self_attention/{name}_{kind}"
        for name in ("query", "key", "value")
        for kind in ("kernel", "bias")
    }
    assert paths == new | projections | {"embedding/position_embedding/position_embeddings"}
    with pytest.raises(ValueError, match="model='bart'"):
        bart_translator_first_stage_variables(tiny_bart())


def test_new_source_encoder_translator_keras_round_trip(tmp_path):
    model = bart_translator(50, VOCAB, new_source_encoder_layers=1, **SETTINGS)
    inputs = {"source_ids": np.array([[45, 6, 7, 0]], "int32"), "target_ids": TARGET[:1]}
    model.save(tmp_path / "translator.keras")
    reloaded = keras.saving.load_model(tmp_path / "translator.keras")
    np.testing.assert_allclose(
        ops.convert_to_numpy(reloaded(inputs)), ops.convert_to_numpy(model(inputs)), atol=1e-6
    )
    assert [w.path for w in reloaded.weights] == [w.path for w in model.weights]
