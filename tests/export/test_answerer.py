"""The exported visual question answerer: image bytes and questions in the graph; the answer,
its probabilities and the attention maps out; the contract check."""

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_attn.errors import ConfigError
from keras_attn.export.answerer import Answerer, export_answerer
from keras_attn.export.captioner import sample_images
from keras_attn.export.contract import ContractError, check_answerer_saved_model
from keras_attn.models.vqa.model import vqa_coattention
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.training.tasks.question_answering import question_vocabulary
from keras_attn.vision import ANSWERS, encode_png, question_splits

SIZE, GRID = 32, (4, 4)
QUESTIONS = question_splits(5, {"test": 2}, image_size=SIZE)["test"][:4]
PNGS = [encode_png(q.scene.image) for q in QUESTIONS]
TEXTS = [q.question for q in QUESTIONS]


def answerer(**kwargs) -> Answerer:
    """An untrained tiny answerer over the question vocabulary (32-pixel images, 4x4 regions)."""
    keras.utils.set_random_seed(3)
    tokenizer = WordPieceTokenizer(question_vocabulary())
    model = vqa_coattention(
        tokenizer.vocab_size, len(ANSWERS), SIZE, embedding_dim=8, units=16, attention_units=8
    )
    return Answerer(model, tokenizer, ANSWERS, **kwargs)


def test_answers_of_image_bytes_and_questions_with_probabilities_and_attention():
    module = answerer()
    outputs = {k: v.numpy() for k, v in module.answer(PNGS, TEXTS).items()}
    pixels = np.stack([q.scene.image for q in QUESTIONS])
    same = module.answer_pixels(tf.constant(pixels), tf.constant(TEXTS))
    for key, value in same.items():
        np.testing.assert_array_equal(outputs[key], value.numpy())
    batch = len(QUESTIONS)
    assert outputs["scores"].shape == (batch, len(ANSWERS))
    assert outputs["attention"].shape == (batch, *GRID)
    np.testing.assert_allclose(outputs["scores"].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(outputs["attention"].sum((1, 2)), 1.0, atol=1e-5)
    assert (outputs["classes"] == np.array([a.encode() for a in ANSWERS])).all()
    best = outputs["scores"].argmax(-1)
    assert [a.decode() for a in outputs["answer"]] == [ANSWERS[i] for i in best]
    # tokens and word weights share the padded layout
    words = outputs["tokens"] != b""
    assert [
        b" ".join(row[keep]).decode() for row, keep in zip(outputs["tokens"], words, strict=True)
    ] == [t.replace("?", " ?") for t in TEXTS]
    assert (outputs["question_attention"][~words] == 0).all()
    np.testing.assert_allclose(outputs["question_attention"].sum(-1), 1.0, atol=1e-5)


def test_empty_questions_long_questions_and_other_image_sizes():
    module = answerer(max_question_length=3)
    jpeg = sample_images(SIZE)[2]  # larger than the model's images: resized in the graph
    outputs = module.answer([jpeg, PNGS[0]], ["", ""])
    assert outputs["tokens"].shape == (2, 1) and np.all(np.isfinite(outputs["scores"]))
    assert (outputs["question_attention"].numpy() == 0).all()
    long = module.answer(PNGS[:1], ["what colour is the square on the left?"])
    assert long["tokens"].shape == (1, 3)


def test_mistakes_are_refused():
    module = answerer()
    with pytest.raises(ConfigError, match="Expected 16 answer names"):
        Answerer(module.model, module.tokenizer, ANSWERS[:3])
    with pytest.raises(ConfigError, match="max_question_length"):
        Answerer(module.model, module.tokenizer, ANSWERS, max_question_length=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="different batch sizes"):
        module.answer(PNGS[:2], TEXTS[:1])


def test_export_is_contract_checked(tmp_path):
    module = answerer()
    version = export_answerer(module, tmp_path / "models", images=PNGS[:3], questions=TEXTS[:3])
    assert version == tmp_path / "models" / "1"
    loaded = tf.saved_model.load(str(version))
    served = loaded.signatures["answer"](image=tf.constant(PNGS), question=tf.constant(TEXTS))
    want = module.answer(PNGS, TEXTS)
    np.testing.assert_allclose(served["scores"], want["scores"], atol=1e-6)
    with pytest.raises(ContractError, match="are not among"):
        check_answerer_saved_model(version, PNGS[:2], TEXTS[:2], ["nothing"] * 16, GRID)
