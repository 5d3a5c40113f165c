"""benchmarks/luong_diagnostics.py on two tiny trained Luong translators."""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

from keras_attn.distributions.softmax import Softmax
from keras_attn.layers.attention.local_attention import LocalAttention
from keras_attn.training.trainer import TrainConfig, train

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "luong_diagnostics.py"
TINY = dict(
    model="rnn-luong", steps=2, batch_size=16, units=16, embedding_dim=8, vocab_size=400,
    dropout=0.0, checkpoint_every=2, eval_sentences=0,
)  # fmt: skip


@pytest.fixture(scope="module")
def diagnostics():
    spec = importlib.util.spec_from_file_location("luong_diagnostics", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_global_and_local_p_statistics(diagnostics, tmp_path, capsys):
    train(tmp_path / "dot", TrainConfig(score="dot", **TINY), progress=False)
    train(tmp_path / "local", TrainConfig(attention="local-p", window=3, **TINY), progress=False)
    softmax_call, positions = Softmax.call, LocalAttention._aligned_positions

    dot = diagnostics.diagnose(str(tmp_path / "dot"), batches=1)
    assert (dot["attention"], dot["score"]) == ("global", "dot")
    assert "p_over_S_mean" not in dot  # global attention predicts no position
    assert np.isfinite(dot["score_std"]) and dot["score_std"] > 0
    assert dot["score_max_abs"] >= dot["score_std"]
    # Softmax over at least two real source positions per step: the top weight is below one
    # and at least 1 / T_x.
    assert 0.0 < dot["mean_max_weight"] < 1.0

    local = diagnostics.diagnose(str(tmp_path / "local"), batches=1)
    assert (local["attention"], local["score"]) == ("local-p", "general")
    assert 0.0 <= local["p_over_S_mean"] <= 1.0  # p_t = S * sigmoid(.) lies in [0, S]
    assert 0.0 <= local["p_over_S_above_0.95"] <= 1.0
    # The wrapped methods are put back.
    assert (Softmax.call, LocalAttention._aligned_positions) == (softmax_call, positions)

    assert diagnostics.main([str(tmp_path / "local"), "--batches", "1"]) == 0
    assert "local-p general: score std" in capsys.readouterr().out
