"""The contract probe's process: one per Python process, reused, replaced when it must be."""

import os
import signal

import pytest
import tensorflow as tf

from keras_attn.export import contract
from keras_attn.export.contract import ContractError, probe_saved_model


class Echo(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serving_default(self, text):
        return {"translation": tf.strings.upper(text)}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("echo") / "1"
    module = Echo()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serving_default})
    return path


def probe_pid(saved, sentences=("a b", "")):
    report = probe_saved_model(saved, list(sentences))
    assert report["outputs"]["serving_default"]["_text"] == [s.upper() for s in sentences]
    assert report["leaked_modules"] == []  # the child imports no keras_attn
    return contract._ProbeProcess._current.process.pid


def test_checks_reuse_one_process_until_it_has_served_its_share(saved, monkeypatch):
    # The process of this worker's earlier checks, if one runs (not closed: the exports after
    # this file would start another), else a new one; its share ends with the next check.
    first = probe_pid(saved)
    monkeypatch.setattr(contract, "PROBES_PER_PROCESS", contract._ProbeProcess._current.used + 1)
    assert probe_pid(saved, ["x"]) == first
    third = probe_pid(saved)
    assert third != first  # a fresh process once that share is served


def test_a_file_that_does_not_load_is_reported_and_the_process_goes_on(saved, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"\xff not a SavedModel")
    before = probe_pid(saved)
    with pytest.raises(
        ContractError,
        match=r"broken does not load and run with only tensorflow \+ tensorflow_text: \S+Error",
    ):
        probe_saved_model(broken, ["a"])
    assert probe_pid(saved) == before


def test_a_process_that_died_is_replaced(saved):
    before = probe_pid(saved)
    os.kill(before, signal.SIGKILL)
    contract._ProbeProcess._current.process.wait()
    assert probe_pid(saved) != before
