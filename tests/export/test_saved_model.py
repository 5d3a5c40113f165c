import pytest
import tensorflow as tf

from keras_attn.export import saved_model
from keras_attn.export.contract import ContractError, check_translator_saved_model
from keras_attn.export.saved_model import existing_versions, export_translator


def test_versions_contract_and_no_overwrite(translator, tmp_path):
    first = export_translator(translator, tmp_path)
    assert first == tmp_path / "1"
    report = check_translator_saved_model(first, ["el gato negro", ""])
    assert not [op for op in report["ops"] if op.startswith(("Cudnn", "PyFunc"))]
    assert "translate_with_alignment" in report["signatures"]
    second = export_translator(translator, tmp_path, check=False)
    assert second == tmp_path / "2" and existing_versions(tmp_path) == [1, 2]
    with pytest.raises(FileExistsError, match="exists already"):
        export_translator(translator, tmp_path, version=1, check=False)
    with pytest.raises(ValueError, match="positive"):
        export_translator(translator, tmp_path, version=0, check=False)
    (tmp_path / "notes").mkdir()
    assert existing_versions(tmp_path) == [1, 2]


def test_failed_check_publishes_nothing(translator, tmp_path, monkeypatch):
    def failing_check(path, sentences=None):
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
