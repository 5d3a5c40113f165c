import numpy as np
import pytest
import tensorflow as tf

from keras_attn.export import saved_model
from keras_attn.export.contract import ContractError, check_translator_saved_model
from keras_attn.export.saved_model import existing_versions, export_translator
from keras_attn.export.translator import Translator
from keras_attn.formats import read_export_description, warmup_path
from keras_attn.serving.warmup import read_warmup_records


def test_versions_contract_and_no_overwrite(translator, tmp_path):
    first = export_translator(translator, tmp_path)
    assert first == tmp_path / "1"
    report = check_translator_saved_model(first, ["el gato negro", ""])
    assert not [op for op in report["ops"] if op.startswith(("Cudnn", "PyFunc"))]
    assert "translate_with_alignment" in report["signatures"]
    with pytest.raises(ContractError, match="unexpected signature 'translate_with_alignment'"):
        check_translator_saved_model(first, with_alignment=False)
    second = export_translator(translator, tmp_path, check=False)
    assert second == tmp_path / "2" and existing_versions(tmp_path) == [1, 2]
    with pytest.raises(FileExistsError, match="exists already"):
        export_translator(translator, tmp_path, version=1, check=False)
    with pytest.raises(ValueError, match="positive"):
        export_translator(translator, tmp_path, version=0, check=False)
    (tmp_path / "notes").mkdir()
    assert existing_versions(tmp_path) == [1, 2]


def test_the_export_records_how_it_decodes(translator, beam_translator, tmp_path):
    # Beside the warm-up file, for the attention viewer (TF Serving's metadata has no such field).
    greedy = export_translator(translator, tmp_path / "greedy", check=False)
    assert read_export_description(greedy) == {"decoder": "greedy", "jit_compile": False}
    beam = export_translator(beam_translator, tmp_path / "beam", check=False)
    assert read_export_description(beam) == {
        "decoder": "beam", "beam_size": 3, "length_penalty": 0.6, "jit_compile": False
    }  # fmt: skip


def test_failed_check_publishes_nothing(translator, tmp_path, monkeypatch):
    def failing_check(path, sentences=None, with_alignment=None):
        raise ContractError("simulated violation")

    monkeypatch.setattr(saved_model, "check_translator_saved_model", failing_check)
    with pytest.raises(ContractError, match="simulated"):
        export_translator(translator, tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ContractError, match="simulated"):
        export_translator(translator, tmp_path / "models" / "translator")
    assert list(tmp_path.iterdir()) == []  # the directories it made for the base path are gone


class PyFuncModule(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def translate(self, text):
        upper = tf.py_function(lambda t: tf.strings.upper(t), [text], tf.string)
        return {"translation": upper}


def test_contract_rejects_pyfunc_and_wrong_signatures(tmp_path):
    module = PyFuncModule()
    tf.saved_model.save(module, str(tmp_path), signatures={"translate": module.translate})
    with pytest.raises(ContractError) as caught:
        check_translator_saved_model(tmp_path)
    message = str(caught.value)
    assert "forbidden ops" in message and "PyFunc" in message
    assert "missing signature 'translate_with_alignment'" in message
    assert "translate: outputs ['translation']" in message


class WithoutAttention:
    """A step view over `steps` whose state has no "attention" entry (no alignments)."""

    def __init__(self, steps):
        self.steps = steps

    def encode(self, source_ids):
        state = self.steps.encode(source_ids)
        return {name: value for name, value in state.items() if name != "attention"}

    def step(self, token_ids, state):
        logits, state = self.steps.step(token_ids, {**state, "attention": 0.0})
        return logits, {name: value for name, value in state.items() if name != "attention"}


def test_a_translator_without_alignments_exports_without_that_signature(translator, tmp_path):
    plain = Translator(
        translator.model,
        WithoutAttention(translator._steps),
        translator.source_tokenizer,
        translator.target_tokenizer,
        max_output_length=translator.max_output_length,
    )
    assert translator.with_alignment and not plain.with_alignment
    version = export_translator(plain, tmp_path, check=False)
    loaded = tf.saved_model.load(str(version))
    assert set(loaded.signatures) == {"serving_default", "translate"}
    texts = tf.constant(["el gato negro", ""])
    got = loaded.signatures["translate"](text=texts)
    for name, value in translator.translate(texts).items():
        if value.dtype == tf.float32:
            np.testing.assert_allclose(got[name].numpy(), value.numpy(), atol=1e-5)
        else:
            np.testing.assert_array_equal(got[name].numpy(), value.numpy())
    records = read_warmup_records(warmup_path(str(version)))
    assert {record.predict_log.request.model_spec.signature_name for record in records} == {
        "serving_default",
        "translate",
    }
    check_translator_saved_model(version, with_alignment=False)  # what the export checks
    with pytest.raises(ContractError, match="missing signature 'translate_with_alignment'"):
        check_translator_saved_model(version)  # alignments are required unless told otherwise
